"""`catalog.duckdb`: one view per table over the latest complete output of its stage.

Writers take `<root>/.catalog.lock` (an exclusive `flock`) first, so two runs finishing on one
data root update the views one after the other and the last run's views win; a DuckDB lock held
by someone else (an open read-write `duckdb` session) is retried until the same deadline.
"""

from __future__ import annotations

import fcntl
import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from storage.layout import CATALOG, MANIFEST

log = logging.getLogger(__name__)
LOCK = ".catalog.lock"
WAIT_S = 120.0  # how long a writer waits for the catalog before giving up with a clear message


class CatalogBusyError(RuntimeError):
    pass


@contextmanager
def catalog_lock(root: Path, wait_s: float = WAIT_S) -> Iterator[None]:
    """Hold the catalog's writer lock; raise CatalogBusyError after `wait_s` seconds of waiting."""
    root.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    with open(root / LOCK, "a") as f:
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise CatalogBusyError(
                        f"{root / CATALOG}: another run has been updating the catalog for {wait_s:.0f} s"
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _connect_for_writing(path: Path, deadline: float) -> duckdb.DuckDBPyConnection:
    """DuckDB refuses a second writer process; wait for it (an open CLI session) until the deadline."""
    while True:
        try:
            return duckdb.connect(str(path))
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                raise CatalogBusyError(f"{path}: {str(exc).splitlines()[0]}") from None
            time.sleep(0.5)


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


def refresh_catalog(root: Path, current: list[Path] = (), wait_s: float = WAIT_S) -> dict[str, Path]:
    """(Re)create the views under the catalog lock; returns what each view points at.

    Views hold absolute paths (DuckDB resolves relative ones against the reader's working
    directory), so a moved data root needs `gur catalog --refresh`.
    """
    deadline = time.monotonic() + wait_s
    with catalog_lock(root, wait_s):
        tables = latest_tables(root, current)  # read under the lock: the newest runs are seen
        con = _connect_for_writing(root / CATALOG, deadline)
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
