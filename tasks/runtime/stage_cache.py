"""How stage tasks cache: on their own manifests, never on Prefect result files.

Prefect's persisted results are records that name their own deserializer (pickle included),
so a crafted file under a results folder would run code on a cached rerun. Stage tasks
therefore persist nothing with Prefect: each run of a stage task computes its fingerprint
(milliseconds), finds the complete output through `StageOutput.open` and returns a `Cached`
state. The cache lives in the data root as data only: Parquet, JSON manifests, exports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import Task
from prefect.cache_policies import NO_CACHE
from prefect.states import State

# The options every stage task is declared with: @task(name=..., **STAGE_TASK).
STAGE_TASK: dict[str, Any] = {"cache_policy": NO_CACHE, "persist_result": False}


def run_stage(stage_task: Task, root: Path, **params: Any) -> dict[str, str]:
    """Call a stage task on the data root; returns its reference (also when it reused its output)."""
    return stage_reference(stage_task(root=str(root), **params))


def stage_reference(result: Any) -> dict[str, str]:
    """A stage's reference from what it returned: the reference, or a `Cached` state holding it."""
    return result.result() if isinstance(result, State) else result
