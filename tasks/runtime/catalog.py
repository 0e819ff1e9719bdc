"""The `update-catalog` Prefect task: point the DuckDB views at the complete outputs, one schema per build.

A flow ends with `catalog_at_end`: run by itself it refreshes the catalog; called by another flow inside
`handed_up()` (the night's data stages, training, evaluation and embedding) it hands its outputs to that flow,
which refreshes the catalog once with all of them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from storage.catalog import refresh_catalog
from storage.layout import data_root
from storage.progress import current_logger
from storage.stage_output import ref_dir

_HANDED_UP: ContextVar[list[dict[str, str]] | None] = ContextVar("gur_catalog_handed_up", default=None)


@contextmanager
def handed_up() -> Iterator[list[dict[str, str]]]:
    """Within the block, flows that end hand their outputs up instead of refreshing the catalog: the list the
    block's flow refreshes it with once (a Prefect subflow runs in its caller's context, so it sees the list)."""
    made: list[dict[str, str]] = []
    token = _HANDED_UP.set(made)
    try:
        yield made
    finally:
        _HANDED_UP.reset(token)


def catalog_at_end(root: str, current: list[dict[str, str]]) -> None:
    """The end of a flow: refresh the catalog with this run's outputs, or hand them to the calling flow."""
    made = _HANDED_UP.get()
    if made is None:
        update_catalog(root, current)
    else:
        made.extend(ref for ref in current if ref not in made)


@task(name="update-catalog", cache_policy=NO_CACHE)
def update_catalog(root: str, current: list[dict[str, str]] | None = None) -> dict[str, str]:
    """A side effect on `catalog.duckdb`, so never cached. `current`: the stage refs this flow
    run produced or reused; their build becomes `main`'s unless it has no rows."""
    base = data_root(root)
    logger = current_logger(__name__)
    try:
        plan = refresh_catalog(base, [ref_dir(base, ref) for ref in current or ()])
    except Exception as exc:  # the stages succeeded; the catalog is a view over them, rebuilt on demand
        logger.warning("catalog not updated (%s); the stage outputs are complete: run `gur catalog --refresh`", exc)
        return {}
    paths = {ref["path"] for ref in current or ()}
    for build in plan.builds:
        if build.output not in paths:
            continue
        shown = plan.main_builds.get(build.kind)
        if shown == build.output:
            logger.info("catalog: this run's tables are in `main` and in schema %s", build.schema)
        else:
            logger.warning(
                "catalog: %s has no rows, so `main` still shows %s; this run's tables are in schema %s",
                build.output,
                shown,
                build.schema,
            )
    made = [ref_dir(base, ref) for ref in current or ()]
    ours = {name: globs for name, globs in plan.main.items() if any(reads_from(globs, d) for d in made)}
    # Only the views over this run's outputs: a night runs six flows, and listing every view each time made
    # the catalog's lines four in ten of a night's log.
    for name, globs in ours.items():  # `metrics` reads one file per evaluation ever run: count those
        files = ", ".join(map(str, globs)) if len(globs) <= 3 else f"{len(globs)} files (table catalog_views)"
        logger.info("catalog view %s -> %s", name, files)
    logger.info(
        "catalog: %d views in `main` (%d over this run's outputs): `gur catalog` lists them", len(plan.main), len(ours)
    )
    return {name: str(globs[0]) for name, globs in plan.main.items()}


def reads_from(globs: list, folder: Path) -> bool:
    """Whether one of a view's globs names files under `folder` (an output's folder)."""
    prefix = str(folder).rstrip("/") + "/"
    return any(str(g).startswith(prefix) for g in globs)
