"""The `train` flow: one GUR training run on the `shuffle` stage's shards."""

from __future__ import annotations

from typing import Any

from prefect import flow

from storage.layout import data_root
from tasks.catalog_task import update_catalog
from tasks.stage_cache import run_stage
from tasks.train_task import latest_ref, train

OBJECTIVES = ("lm+cl", "cl", "lm")


@flow(name="train", log_prints=True)
def train_flow(
    shards: dict[str, str] | None = None,
    root: str | None = None,
    method: str = "gur",
    variant: str = "lcs",
    objective: str = "lm+cl",
    preset: str = "small",
    steps: int = 10000,
    pooling: str = "cls",
    init_from: str = "",
    lr: float = 1e-4,
    options: dict[str, Any] | None = None,
    nproc: int = 0,
) -> dict[str, str]:
    """Train (or resume, or reuse) a model; `shards` defaults to the newest complete `shuffle` output.

    `variant` names the pair filter the shards were built with (`lcs` or `none`) and is recorded
    in the manifest; `options` sets any other TrainConfig field (batch sizes, warmup, schedule, ...).
    """
    if method != "gur":
        raise ValueError(f"method {method!r} is not trained by this flow (only 'gur')")
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, not {objective!r}")
    base = data_root(root)
    shards = shards or latest_ref(base, "shuffle")
    config = {
        "objective": objective,
        "preset": preset,
        "max_steps": steps,
        "pooling": pooling,
        "init_from": init_from,
        "lr": lr,
        **(options or {}),
    }
    ref = run_stage(
        train, base, shards=shards, config=config, nproc=nproc, labels={"method": method, "variant": variant}
    )
    update_catalog(str(base), [shards, ref])
    return ref
