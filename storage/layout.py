"""Where things live under the data root (`GUR_HOME`, default `./data`)."""

from __future__ import annotations

import os
import re
from pathlib import Path

MANIFEST = "_manifest.json"
INVALID = "_invalid.json"  # `gur verify` found this output damaged: the next run rebuilds it
DONE_DIR = "_done"
TMP_DIR = "_tmp"
PREFECT_RESULTS = "prefect-results"
CATALOG = "catalog.duckdb"
SPLIT_SOURCE = "_source.json"  # a held-out split's corpus (for `gur du`: the folder name is a fingerprint)


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The data root: the argument, else `$GUR_HOME`, else `./data`; always absolute."""
    chosen = root if root is not None else os.environ.get("GUR_HOME", "data")
    return Path(chosen).expanduser().resolve()


FINGERPRINT = re.compile(r"[0-9a-f]{16}")


def record_path(root: Path, path: str | os.PathLike | None) -> str:
    """How a record of this root names `path`: relative to the root when the root holds it (a champion's export,
    a held-out split, the model an embedding used), so a moved or copied root's records stay true; a path outside
    the root (a corpus folder, a model promoted from elsewhere) stays absolute; no path (None, "") stays as it is."""
    if not path:
        return path
    text = os.fspath(path)
    base = os.fspath(root)
    if text == base:
        return "."
    if text.startswith(base + os.sep):
        return text[len(base) + 1 :]
    return text


def recorded_path(root: Path, recorded: str | os.PathLike | None) -> str:
    """The absolute path a record of this root names, as it is now. A relative record is under the root. An
    absolute one is outside it, or was written before records were relative (a root made by earlier versions):
    such a path is mapped to `root` when the same `<folder>/<fingerprint>` is here (same fingerprint, same
    content), so a root moved or copied since then keeps working. Anything else is returned unchanged."""
    if not recorded:
        return str(recorded or "")
    text = os.fspath(recorded)
    base = os.fspath(root)
    if not os.path.isabs(text):
        return base if text == "." else os.path.join(base, text)
    if text == base or text.startswith(base + os.sep):
        return text
    parts = Path(text).parts
    for i in range(len(parts) - 2, 0, -1):  # the innermost `<folder>/<fingerprint>` wins
        if FINGERPRINT.fullmatch(parts[i + 1]) and os.path.isdir(os.path.join(base, parts[i], parts[i + 1])):
            return os.path.join(base, *parts[i:])
    return text


def record_paths(root: Path, record: dict, keys: tuple[str, ...]) -> dict:
    """`record` with its path-valued `keys` as the root's records name them (`record_path`)."""
    return {**record, **{k: record_path(root, record[k]) for k in keys if record.get(k)}}


def recorded_paths(root: Path, record: dict, keys: tuple[str, ...]) -> dict:
    """`record` with its path-valued `keys` absolute, where they are now (`recorded_path`)."""
    return {**record, **{k: recorded_path(root, record[k]) for k in keys if record.get(k)}}


def stage_dir(root: Path, stage: str, fingerprint: str) -> Path:
    return root / stage / fingerprint


def shard_name(index: int, prefix: str = "part") -> str:
    """Zero-padded shard file name: `part-00007.parquet`."""
    return f"{prefix}-{index:05d}.parquet"


def done_marker(out_dir: Path, index: int, table: str = "") -> Path:
    """Empty file written after shard `index` of `table` is in place (`_done/00007`)."""
    name = f"{index:05d}" if not table else f"{table}-{index:05d}"
    return out_dir / DONE_DIR / name
