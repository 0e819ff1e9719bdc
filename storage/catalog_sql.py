"""The SQL of the catalog's views: a view per table over its Parquet globs (unions, run columns, the
`manifests` view, derived views) and the stamps that tell a changed view from an unchanged one."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import xxhash

from storage.catalog_plan import BY_NAME_TABLES, UNION_TABLES, CatalogPlan, _files_exist
from storage.manifest_index import IDENTIFIER

log = logging.getLogger("storage.catalog")  # one logger for the catalog's modules

METRICS_KEY = ("model", "dataset", "task", "metric", "k")
MANIFEST_COLUMNS = {  # the `manifests` view: one row per stage output of a build; nested fields stay JSON
    "stage": "VARCHAR",
    "fingerprint": "VARCHAR",
    "code_version": "VARCHAR",
    "config": "JSON",
    "inputs": "JSON",
    "rows": "JSON",
    "drops": "JSON",
    "timings": "JSON",
    "coerced": "JSON",
    "false_negatives": "JSON",
    "stats": "JSON",
    "rebuilt": "JSON",
    "started_at": "DOUBLE",
    "finished_at": "DOUBLE",
}
DERIVED = {
    "metrics_latest": f"SELECT * FROM metrics QUALIFY row_number() OVER "
    f"(PARTITION BY {', '.join(METRICS_KEY)} ORDER BY created_at DESC) = 1"
}


def quote_name(name: str) -> str:
    """A schema, table or column name as a quoted SQL identifier; anything but `[A-Za-z0-9_]+` raises."""
    if not IDENTIFIER.fullmatch(name):
        raise ValueError(f"not a catalog name ({IDENTIFIER.pattern}): {name[:60]!r}")
    return f'"{name}"'


def _quote(value: object) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _select(table: str, globs: list[Path]) -> str:
    paths = ", ".join(_quote(g) for g in globs)
    by_name = len(globs) > 1 or table in BY_NAME_TABLES
    source = f"read_parquet([{paths}], union_by_name = true)" if by_name else f"read_parquet({paths})"
    return f"SELECT {'DISTINCT ' if table in UNION_TABLES else ''}* FROM {source}"


def _select_runs(globs: list[Path], file_columns: list[dict[str, str | None]]) -> str:
    """Each file's rows after its own constant columns; `UNION ALL BY NAME`, as runs of different
    methods log different loss columns."""
    parts = []
    for glob, columns in zip(globs, file_columns, strict=True):
        constants = ", ".join(
            f"CAST({'NULL' if value is None else _quote(value)} AS VARCHAR) AS {quote_name(name)}"
            for name, value in columns.items()
        )
        parts.append(f"SELECT {constants}, * FROM read_parquet({_quote(glob)})")
    return " UNION ALL BY NAME ".join(parts)


def _select_manifests(paths: tuple[Path, ...]) -> str:
    files = ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths)
    columns = ", ".join(f"'{name}': '{kind}'" for name, kind in MANIFEST_COLUMNS.items())
    return f"SELECT * FROM read_json([{files}], format = 'auto', columns = {{{columns}}}, filename = true)"


def _views(plan: CatalogPlan) -> tuple[list[tuple[str, str, str]], list[tuple]]:
    """(schema, view, SQL) of every view in creation order, and the `catalog_views` rows."""
    views, files = [], []
    planned = [(b.schema, t, g) for b in plan.builds for t, g in b.tables.items()]
    for schema, table, globs in planned + [("main", t, g) for t, g in plan.main.items()]:
        if not _files_exist(globs):
            log.warning("catalog: no files for %s.%s (%s)", schema, table, globs[0])
            continue
        tagged = plan.file_columns.get(table) if schema == "main" else None
        sql = _select_runs(globs, tagged) if tagged else _select(table, globs)
        views.append((schema, table, sql))
        files.append(
            (schema, table, [str(g) for g in globs], table in UNION_TABLES, json.dumps(tagged) if tagged else None)
        )
    for schema, paths in [(b.schema, b.manifests) for b in plan.builds] + [("main", plan.main_manifests)]:
        if paths:
            views.append((schema, "manifests", _select_manifests(paths)))
    for name, sql in DERIVED.items():
        if "metrics" in plan.main:
            views.append(("main", name, sql))
    return views, files


def _builds_rows(plan: CatalogPlan) -> list[tuple]:
    """The `builds` table's rows."""
    return [
        (
            b.schema,
            b.kind,
            plan.main_builds.get(b.kind) == b.output,
            b.source,
            b.rows,
            b.output,
            b.finished_at,
            b.output.split("/", 1)[1],  # the head's fingerprint: train_metrics.input_fingerprint
        )
        for b in plan.builds
    ]


def _stamps(views: list[tuple[str, str, str]]) -> dict[str, str]:
    return {f"{schema}.{table}": _stamp(sql) for schema, table, sql in views}


def _tables_stamp(plan: CatalogPlan, files: list[tuple]) -> str:
    """What the catalog's two tables (`catalog_views` rows `files`, `builds`) and `main`'s builds hold."""
    payload = json.dumps([files, _builds_rows(plan), plan.main_builds], sort_keys=True, default=str)
    return xxhash.xxh3_128_hexdigest(payload.encode())


def _stamp(sql: str) -> str:
    """What a view was made from. Its SQL is enough: DuckDB binds a view's columns again when it is read, so a
    folder that gains a file with a new column (the `promotions` rows, one file per decision) needs no new view
    (tests/storage/test_catalog_builds.py checks the columns SQL tools list), and a DuckDB upgrade rebuilds the
    file."""
    return xxhash.xxh3_128_hexdigest(sql.encode())
