"""Where things live under the data root (`GUR_HOME`, default `./data`)."""

from __future__ import annotations

import os
from pathlib import Path

MANIFEST = "_manifest.json"
INVALID = "_invalid.json"  # `gur verify` found this output damaged: the next run rebuilds it
DONE_DIR = "_done"
TMP_DIR = "_tmp"
PREFECT_RESULTS = "prefect-results"
CATALOG = "catalog.duckdb"


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The data root: the argument, else `$GUR_HOME`, else `./data`; always absolute."""
    chosen = root if root is not None else os.environ.get("GUR_HOME", "data")
    return Path(chosen).expanduser().resolve()


def stage_dir(root: Path, stage: str, fingerprint: str) -> Path:
    return root / stage / fingerprint


def shard_name(index: int, prefix: str = "part") -> str:
    """Zero-padded shard file name: `part-00007.parquet`."""
    return f"{prefix}-{index:05d}.parquet"


def done_marker(out_dir: Path, index: int, table: str = "") -> Path:
    """Empty file written after shard `index` of `table` is in place (`_done/00007`)."""
    name = f"{index:05d}" if not table else f"{table}-{index:05d}"
    return out_dir / DONE_DIR / name
