"""What `gur` prints: aligned tables, one-line errors, SQL over the catalog, a run's stage outputs."""

from __future__ import annotations

from pathlib import Path


def format_table(columns: list[str], rows: list[tuple], max_width: int = 60) -> str:
    """A plain aligned text table; long cells are cut with an ellipsis."""

    def cell(value: object) -> str:
        text = "NULL" if value is None else str(value).replace("\n", " ")
        return text if len(text) <= max_width else text[: max_width - 1] + "…"

    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join([line, rule, *body, f"({len(rows)} row{'s' if len(rows) != 1 else ''})"])


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (DuckDB's `LINE 1: ...` excerpt and its caret are left out)."""
    lines = [line.strip() for line in str(exc).splitlines()]
    kept = [line for line in lines if line and not line.startswith("LINE ") and set(line) != {"^"}]
    return " ".join(kept) or type(exc).__name__


class QueryError(ValueError):
    """A query DuckDB refused; the message is DuckDB's, on one line."""


def run_sql(root: Path, query: str, limit: int) -> str:
    import duckdb

    from storage.catalog import connect_catalog

    con = connect_catalog(root)
    try:
        cursor = con.execute(query)
        columns = [d[0] for d in cursor.description] if cursor.description else []
        rows = cursor.fetchmany(limit) if columns else []
    except duckdb.Error as exc:
        raise QueryError(one_line(exc)) from exc
    finally:
        con.close()
    return format_table(columns, rows) if columns else "OK"


def report(root: Path, result: dict[str, dict[str, str]]) -> None:
    from storage.stage_output import ref_dir, ref_manifest

    print(f"\ndata root: {root}")
    for name, ref in result.items():
        manifest = ref_manifest(root, ref)
        rows = ", ".join(f"{k}={v}" for k, v in manifest["rows"].items())
        drops = ", ".join(f"{k}={v}" for k, v in manifest["drops"].items() if v) or "none"
        print(f"  {name:<10} {ref_dir(root, ref)}  rows: {rows}  drops: {drops}")
        if name == "documents":
            from tasks.ingest.read_summary import summary_lines

            for line in summary_lines(manifest):
                print(f"  {'':<10} {line}")
    print(f"  catalog    {root / 'catalog.duckdb'}")
