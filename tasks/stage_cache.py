"""Prefect caching shared by every stage task, and the check that a cached output still exists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import Task
from prefect.cache_policies import INPUTS, TASK_SOURCE, CachePolicy

from storage.layout import PREFECT_RESULTS
from storage.stage_output import ref_complete
from tasks.progress import current_logger

PIPELINE_SALT = "gur-pipeline-v1"  # bump to invalidate every cached task result at once


def stage_cache_policy(code_version: str) -> CachePolicy:
    """INPUTS + TASK_SOURCE + a salt naming the stage's code version.

    TASK_SOURCE hashes only the task function's own lines, not the pure functions it calls;
    the code-version salt covers those. No run id: the cache carries across nightly runs.
    """
    salt = f"{PIPELINE_SALT}/{code_version}"
    return INPUTS + TASK_SOURCE + CachePolicy.from_cache_key_fn(lambda ctx, params: salt)


def run_stage(stage_task: Task, root: Path, **params: Any) -> dict[str, str]:
    """Call a stage task with results under the data root; recompute if its output was deleted.

    Prefect only remembers that the task ran, not that its folder still exists, so a cache
    hit whose stage folder is gone (or incomplete) is run again with `refresh_cache=True`.
    """
    task = stage_task.with_options(result_storage=root / PREFECT_RESULTS, persist_result=True)
    ref = task(root=str(root), **params)
    if not ref_complete(root, ref):
        current_logger(__name__).warning("cached output %s is missing; recomputing", ref["path"])
        ref = task.with_options(refresh_cache=True)(root=str(root), **params)
    return ref
