"""`catalog.duckdb`: one view per table over the latest complete output of its stage."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import duckdb

from storage.layout import CATALOG, MANIFEST

log = logging.getLogger(__name__)


def _manifest(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        log.warning("skipping unreadable manifest %s: %s", path, exc)
        return None


def latest_tables(root: Path, current: list[Path] = ()) -> dict[str, Path]:
    """Map table name -> absolute Parquet glob of the newest complete stage that writes it.

    `current`: stage folders a flow run just used; their tables win over newer ones, so a
    cached rerun on one corpus shows that corpus even when another was built after it.
    """
    best: dict[str, tuple[float, Path]] = {}
    for manifest_path in sorted(root.glob(f"*/*/{MANIFEST}")):
        manifest = _manifest(manifest_path)
        if manifest is None:
            continue
        finished = float(manifest.get("finished_at", 0.0))
        for table, pattern in manifest.get("tables", {}).items():
            if table not in best or finished >= best[table][0]:
                best[table] = (finished, manifest_path.parent / pattern)
    for folder in current:
        manifest = _manifest(folder / MANIFEST) if (folder / MANIFEST).exists() else None
        for table, pattern in (manifest or {}).get("tables", {}).items():
            best[table] = (float("inf"), folder / pattern)
    return {table: glob for table, (_, glob) in sorted(best.items())}


def refresh_catalog(root: Path, current: list[Path] = ()) -> dict[str, Path]:
    """(Re)create the views; returns what each view points at.

    Views hold absolute paths (DuckDB resolves relative ones against the reader's working
    directory), so a moved data root needs `gur catalog --refresh`.
    """
    tables = latest_tables(root, current)
    root.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(root / CATALOG))
    try:
        for table, glob in tables.items():
            path = str(glob).replace("'", "''")
            con.execute(f"CREATE OR REPLACE VIEW \"{table}\" AS SELECT * FROM read_parquet('{path}')")
    finally:
        con.close()
    return tables


def connect_catalog(root: Path, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    path = root / CATALOG
    if not path.exists():
        raise FileNotFoundError(f"no catalog at {path}: run a flow first (e.g. `gur demo`)")
    return duckdb.connect(str(path), read_only=read_only)
