"""The `update-catalog` Prefect task: point the DuckDB views at the newest complete outputs."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from storage.catalog import refresh_catalog
from storage.layout import data_root
from storage.progress import current_logger
from storage.stage_output import ref_dir


@task(name="update-catalog", cache_policy=NO_CACHE)
def update_catalog(root: str, current: list[dict[str, str]] | None = None) -> dict[str, str]:
    """A side effect on `catalog.duckdb`, so never cached. `current`: the stage refs this flow
    run produced or reused; their tables win over newer outputs of other runs."""
    base = data_root(root)
    logger = current_logger(__name__)
    try:
        tables = refresh_catalog(base, [ref_dir(base, ref) for ref in current or ()])
    except Exception as exc:  # the stages succeeded; the catalog is a view over them, rebuilt on demand
        logger.warning("catalog not updated (%s); the stage outputs are complete: run `gur catalog --refresh`", exc)
        return {}
    for name, glob in tables.items():
        logger.info("catalog view %s -> %s", name, glob)
    return {name: str(glob) for name, glob in tables.items()}
