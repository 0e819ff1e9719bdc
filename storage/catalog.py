"""`catalog.duckdb`: DuckDB views over the complete stage outputs of a data root.

One schema per build, so the tables of one build always come from the same run:

- a build-pairs run (a `shuffle` output and the `pair`, `split`, `ingest` outputs it was made
  from) is schema `<source>_<shuffle fingerprint[:8]>` with `documents`, `rejects`, `sentences`,
  `pairs`, `shards`, `shards_short`, `shards_long`;
- a mine-keywords run is schema `<source>_kw_<keywords fingerprint[:8]>` with `keywords`,
  `topics`, `topic_sweep` and the `documents`, `rejects` (and `sentences`) they were mined from.

`main` (what an unqualified name reads) holds the same views for one build and one keywords
run: those the latest flow run used, else the ones `main` showed before, else the newest.
A build without shards never becomes `main`'s build while one with shards exists.
`metrics` is every evaluation ever run on the root, `metrics_latest` the newest value per
model x dataset x task x metric x k; `train_metrics` is every training run's rows, each with the
run's `train_fingerprint`, `method` and the `input_stage` / `input_fingerprint` it trained on
(a `shuffle` or `keywords` output: `builds.fingerprint`, so `JOIN builds b ON b.fingerprint =
t.input_fingerprint` names the build schema; `file` inputs have no fingerprint). Other tables
(`promotions`) follow the newest output. Each schema (and `main`) has a `manifests` view: one row
per stage output behind its views (rows, drops, timings, config as JSON). The table `builds` lists
the schemas (with the head output's `fingerprint`); `catalog_views` the Parquet files behind each
view (and, for `train_metrics`, the columns each file's rows get: `file_columns`).

Writers take `<root>/.catalog.lock` (an exclusive `flock`) first, so two runs finishing on one
data root update the catalog one after the other. Every update plans the whole catalog from the
manifests, writes it to a temporary file and renames it into place: open read-only sessions do not
block it, a file DuckDB cannot read (written by another DuckDB version) is simply replaced, and
tables of your own belong in another database file (`ATTACH 'mine.duckdb'`). The temporary file is
a copy of the catalog the last update wrote (`.catalog-main.json` records its stat, the DuckDB
version and each view's SQL) with only the changed views made again, or, when the catalog is any
other file, written whole: the same views either way, and a night's updates stop costing more as
the root keeps more runs and builds. An open read-write session is waited for until the same deadline.

This module is the writer (its lock, the sidecar, the file written and renamed) and the read API
(`connect_catalog`, `list_views`, `catalog_files`); what it writes is planned by `storage/catalog_plan.py`
from the manifests `storage/manifest_index.py` reads, as the SQL `storage/catalog_sql.py` makes.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from storage.atomic import atomic_write_text
from storage.catalog_plan import CatalogPlan, plan_catalog
from storage.catalog_sql import _builds_rows, _stamps, _tables_stamp, _views, quote_name
from storage.layout import CATALOG
from storage.locks import LockBusy, file_lock

log = logging.getLogger(__name__)

LOCK = ".catalog.lock"
WAIT_S = 120.0  # how long a writer waits for the catalog before giving up with a clear message


class CatalogBusyError(RuntimeError):
    pass


@contextmanager
def catalog_lock(root: Path, wait_s: float = WAIT_S) -> Iterator[None]:
    """Hold the catalog's writer lock; raise CatalogBusyError after `wait_s` seconds of waiting."""

    def refused(_: LockBusy) -> CatalogBusyError:
        return CatalogBusyError(f"{root / CATALOG}: another run has been updating the catalog for {wait_s:.0f} s")

    with file_lock(root / LOCK, wait_s=wait_s, refused=refused):
        yield


def _unreadable_version(exc: Exception) -> bool:
    return "version number" in str(exc) or "newer version of duckdb" in str(exc).lower()


def _previous_main(path: Path, deadline: float) -> dict[str, str]:
    """kind -> output `main` showed, from the catalog being replaced ({} when there is none or DuckDB
    cannot read it: written by another DuckDB version). Readers (a `duckdb -readonly` session) do not
    block this; an open read-write session does, and is waited for until the deadline."""
    if not path.exists():
        return {}
    remembered = _remembered_main(path)
    if remembered is not None:
        return remembered
    while True:
        try:
            con = duckdb.connect(str(path), read_only=True)
            break
        except duckdb.Error as exc:
            if _unreadable_version(exc) or "lock" not in str(exc).lower():
                log.warning("%s: %s; rebuilding it", path, str(exc).splitlines()[0])
                return {}
            if time.monotonic() > deadline:
                raise CatalogBusyError(f"{path}: {str(exc).splitlines()[0]}") from None
            time.sleep(0.5)
    try:
        rows = con.execute("SELECT kind, output FROM builds WHERE in_main").fetchall()
    except duckdb.Error:  # a catalog from before `builds`
        rows = []
    finally:
        con.close()
    return dict(rows)


def main_builds(root: Path, wait_s: float = WAIT_S) -> dict[str, str]:
    """kind -> the output the catalog's `main` shows ({} without a catalog, or one of another DuckDB version);
    busy past `wait_s`: CatalogBusyError."""
    return _previous_main(root / CATALOG, time.monotonic() + wait_s)


MAIN = ".catalog-main.json"  # what `main` shows and a stamp per view, beside the catalog file it was written with
SIDECAR_VERSION = 2


def _recorded(path: Path) -> dict:
    """What the last refresh recorded beside the catalog file `path`, whichever file it was written with ({}
    when there is nothing readable)."""
    try:
        data = json.loads((path.parent / MAIN).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _sidecar(path: Path) -> dict | None:
    """What the last refresh recorded beside the catalog (`main`'s builds, a stamp per view), when the catalog
    is still the file it wrote (same inode, mtime and size); None otherwise."""
    data = _recorded(path)
    try:
        st = os.stat(path)
    except OSError:
        return None
    return data if data.get("catalog") == [st.st_ino, st.st_mtime_ns, st.st_size] else None


def _remembered_main(path: Path) -> dict[str, str] | None:
    """`main`'s builds as the last refresh recorded them (see `_sidecar`). Opening the catalog to ask costs
    more each night: DuckDB loads every view, and the record views list a file per evaluation and run the
    root ever kept."""
    main = (_sidecar(path) or {}).get("main")
    return main if isinstance(main, dict) else None


def _remembered_write(path: Path) -> dict | None:
    """The sidecar of the catalog file as the last refresh wrote it, with its `views` (view -> stamp) and
    `tables` stamps (None: not ours, or from older code)."""
    data = _sidecar(path) or {}
    same = data.get("version") == SIDECAR_VERSION and data.get("duckdb") == duckdb.__version__
    return data if same and isinstance(data.get("views"), dict) else None


def _remember_main(
    path: Path, main: dict[str, str], views: dict[str, str] | None = None, tables: str | None = None
) -> None:
    try:
        st = os.stat(path)
        data = {"catalog": [st.st_ino, st.st_mtime_ns, st.st_size], "main": main, "root": str(path.parent.resolve())}
        if views is not None:
            data.update(version=SIDECAR_VERSION, duckdb=duckdb.__version__, views=views, tables=tables)
        atomic_write_text(path.parent / MAIN, json.dumps(data, separators=(",", ":")))
    except OSError as exc:  # only a shortcut: the next refresh opens the catalog and writes it whole
        log.debug("%s not written: %s", MAIN, exc)


def _write(
    con: duckdb.DuckDBPyConnection,
    plan: CatalogPlan,
    old: dict[str, str] | None = None,
    content: tuple[list[tuple[str, str, str]], list[tuple]] | None = None,
) -> dict[str, str]:
    """Write the plan's views and tables into `con`: an empty database, or (`old`: view -> stamp) a copy of the
    catalog the last refresh wrote, where only views whose stamp changed are made again, views and schemas the
    plan no longer has are dropped, and the tables are rewritten: the same catalog as a whole rebuild, at a
    fraction of the cost (binding a view reads the footer of every Parquet file it names). Returns the stamps."""
    con.execute("BEGIN TRANSACTION")
    views, files = content or _views(plan)
    stamps = _stamps(views)
    if old is not None:
        kept_schemas = {schema for schema, *_ in views}
        for schema in sorted({key.split(".", 1)[0] for key in old} - kept_schemas - {"main"}):
            con.execute(f"DROP SCHEMA IF EXISTS {quote_name(schema)} CASCADE")
        for key in sorted(set(old) - set(stamps)):
            schema, table = key.split(".", 1)
            if schema in kept_schemas or schema == "main":
                con.execute(f"DROP VIEW IF EXISTS {quote_name(schema)}.{quote_name(table)}")
    made = set()
    for schema, table, sql in views:
        key = f"{schema}.{table}"
        if old is not None and old.get(key) == stamps[key]:
            continue
        if schema != "main" and schema not in made:
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_name(schema)}")
            made.add(schema)
        con.execute(f"CREATE OR REPLACE VIEW {quote_name(schema)}.{quote_name(table)} AS {sql}")
    con.execute(
        'CREATE OR REPLACE TABLE catalog_views ("schema" VARCHAR, view_name VARCHAR, files VARCHAR[], dedup BOOLEAN, '
        "file_columns JSON)"  # per file of `files`, the constant columns its rows get (RUN_TABLES), else NULL
    )
    if files:
        _insert(con, "catalog_views", ["schema", "view_name", "files", "dedup", "file_columns"], files)
    con.execute(
        'CREATE OR REPLACE TABLE builds ("schema" VARCHAR, kind VARCHAR, in_main BOOLEAN, source VARCHAR, '
        '"rows" BIGINT, output VARCHAR, finished_at TIMESTAMPTZ, fingerprint VARCHAR)'
    )
    rows = _builds_rows(plan)
    if rows:
        names = ["schema", "kind", "in_main", "source", "rows", "output", "finished_at", "fingerprint"]
        _insert(con, "builds", names, rows)
    con.execute("COMMIT")
    return stamps


def _insert(con: duckdb.DuckDBPyConnection, table: str, names: list[str], rows: list[tuple]) -> None:
    """All `rows` in one statement through Arrow (`executemany` costs a statement per row)."""
    import pyarrow as pa

    data = pa.Table.from_pylist([dict(zip(names, row, strict=True)) for row in rows])
    con.register("_rows", data)
    try:
        casts = ", ".join(f"to_timestamp({quote_name(n)})" if n == "finished_at" else quote_name(n) for n in names)
        con.execute(f"INSERT INTO {quote_name(table)} SELECT {casts} FROM _rows")
    finally:
        con.unregister("_rows")


def refresh_catalog(
    root: Path, current: list[Path] = (), wait_s: float = WAIT_S, without: frozenset[str] = frozenset()
) -> CatalogPlan:
    """Rebuild the catalog under the catalog lock; returns what its views read.

    The new catalog is written to a temporary file and renamed over the old one, so an open
    `duckdb -readonly` session never blocks a run (it keeps seeing the views it opened; a new
    session sees the new ones). Views hold absolute paths (DuckDB resolves relative ones against
    the reader's working directory), so a moved data root is refreshed by the first command that reads
    its catalog (`connect_catalog`), or by `gur catalog --refresh`.
    """
    deadline = time.monotonic() + wait_s
    path = root / CATALOG
    with catalog_lock(root, wait_s):
        previous = _previous_main(path, deadline)
        plan = plan_catalog(root, current, previous, without)  # read under the lock: the newest runs are seen
        tmp = root / f".{CATALOG}.tmp"  # one writer at a time (the lock): a fixed name, never left behind twice
        last = _remembered_write(path)
        old = last["views"] if last else None
        content = _views(plan)
        tables = _tables_stamp(plan, content[1])
        stale_wal = path.with_name(path.name + ".wal")  # of a session that was killed (a live one holds the lock)
        same = last is not None and old == _stamps(content[0]) and last.get("tables") == tables
        if same and not stale_wal.exists():
            if last.get("root") != str(root.resolve()):  # a sidecar from before it named its root: name it
                _remember_main(path, plan.main_builds, old, tables)
            return plan  # the file already holds exactly these views and tables: nothing to write
        stamps = None
        if old is not None:  # the file the last refresh wrote: update a copy of it
            try:
                tmp.unlink(missing_ok=True)
                shutil.copyfile(path, tmp)
                stamps = _write_file(tmp, plan, old, content)
            except (OSError, duckdb.Error) as exc:
                log.warning("catalog: updating %s failed (%s); rebuilding it", path, str(exc).splitlines()[0])
        if stamps is None:
            tmp.unlink(missing_ok=True)
            stamps = _write_file(tmp, plan, None, content)
        stale_wal.unlink(missing_ok=True)
        os.replace(tmp, path)
        _remember_main(path, plan.main_builds, stamps, tables)
    return plan


# DuckDB's smallest block: a catalog is views and two small tables, and an update frees and rewrites some of
# its blocks, so small blocks keep the file a fraction of its size with the default block (the results log:
# docs/results/, the catalog updated in place).
BLOCK_SIZE = 16384


def _write_file(
    path: Path,
    plan: CatalogPlan,
    old: dict[str, str] | None = None,
    content: tuple[list[tuple[str, str, str]], list[tuple]] | None = None,
) -> dict[str, str]:
    """Write `plan` into `path`: a copy of the last catalog with view stamps `old`, or a new file."""
    config = {} if old is not None else {"default_block_size": str(BLOCK_SIZE)}  # a copy keeps its block size
    con = duckdb.connect(str(path), config=config)
    try:
        return _write(con, plan, old, content)
    finally:
        con.close()  # checkpoints: everything is in the file, no WAL left


def written_elsewhere(root: Path) -> bool:
    """Whether the catalog was last written by a refresh of this root where it was before (moved or copied): its
    views hold absolute paths, so they read the old place, or fail there. The sidecar is read whatever file it
    was written with (a copy's catalog is another inode); a catalog without one naming a root is not ours to
    rewrite here (made by hand, or by an older version: the next flow's refresh names it)."""
    recorded = _recorded(root / CATALOG).get("root")
    return recorded is not None and recorded != str(Path(root).resolve())


def connect_catalog(root: Path, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """The catalog, refreshed first when it was written elsewhere (`written_elsewhere`): a moved root reads as
    before."""
    path = root / CATALOG
    if not path.exists():
        raise FileNotFoundError(f"no catalog at {path}: run a flow first (e.g. `gur demo`)")
    if written_elsewhere(root):
        try:
            refresh_catalog(root)
        except (OSError, duckdb.Error, CatalogBusyError) as exc:  # a read-only copy: its views as they are
            log.warning("catalog: %s was written elsewhere and not refreshed here (%s)", path, exc)
    try:
        return duckdb.connect(str(path), read_only=read_only)
    except duckdb.IOException as exc:
        if _unreadable_version(exc):
            raise RuntimeError(
                f"{path} was written by another DuckDB version: run `gur catalog --refresh` to rebuild it"
            ) from None
        raise


def list_views(con: duckdb.DuckDBPyConnection) -> list[tuple[str, int, str]]:
    """(view, rows, definition) for `gur catalog`: `main`'s views by name, then each build's as `schema.view`."""
    views = con.execute(
        "SELECT schema_name, view_name, sql FROM duckdb_views() WHERE NOT internal "
        "ORDER BY schema_name <> 'main', schema_name, view_name"
    ).fetchall()
    rows = []
    for schema, name, sql in views:
        count = con.execute(f'SELECT count(*) FROM "{schema}"."{name}"').fetchone()[0]
        rows.append((name if schema == "main" else f"{schema}.{name}", count, sql))
    return rows


def catalog_files(
    root: Path, name: str, build: str | None = None
) -> tuple[list[str], bool, list[dict[str, str | None]] | None]:
    """(Parquet globs, dedup, per-glob constant columns or None) behind the view `name` of `main` or of
    schema `build`, as the catalog records them."""
    con = connect_catalog(root)
    try:
        row = con.execute(
            'SELECT files, dedup, file_columns FROM catalog_views WHERE "schema" = ? AND view_name = ?',
            [build or "main", name],
        ).fetchone()
        if row is None:
            known = con.execute("""SELECT DISTINCT "schema" || '.' || view_name FROM catalog_views ORDER BY 1""")
            names = ", ".join(k for (k,) in known.fetchall())
            raise KeyError(f"no view {name!r} in {build or 'main'} (known: {names})")
    finally:
        con.close()
    columns = row[2]
    if isinstance(columns, str):
        columns = json.loads(columns)
    return list(row[0]), bool(row[1]), columns
