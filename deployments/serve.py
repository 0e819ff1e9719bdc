"""Serve every deployment from one long-running process.

With `prefect server start` running and `PREFECT_API_URL` pointing at it:
    python -m deployments.serve        (or `gur serve`)
    prefect deployment run build-pairs/build-pairs --watch
    prefect deployment run train/train -p preset=tiny -p steps=300
    prefect deployment run train/train -p method=tfcsg -p preset=cpu
    prefect deployment run evaluate/evaluate -p 'models=["minilm","bm25"]'
Flow runs execute in this process's environment (its working directory and `GUR_HOME`).
`nightly-retrain/nightly-retrain` runs on a cron schedule (default 02:00 UTC; `gur serve --cron
--timezone`, or `--no-schedules`); `GUR_NIGHTLY_CRON` / `GUR_NIGHTLY_TZ` set it for this module.
"""

from __future__ import annotations

import os

os.environ.setdefault("DO_NOT_TRACK", "1")


NIGHTLY_CRON = "0 2 * * *"
NIGHTLY_TZ = "UTC"


def build_deployments(
    cron: str = NIGHTLY_CRON, timezone: str = NIGHTLY_TZ, schedules: bool = True, nightly_config: str | None = None
) -> list:
    """Every deployment; `nightly-retrain/nightly-retrain` on `cron` in `timezone` (no schedule with
    `schedules=False`) with a concurrency limit of 1, reading `nightly_config` (default `<root>/nightly.toml`)."""
    from prefect.schedules import Cron

    from flows.build_pairs import build_pairs
    from flows.evaluate import evaluate
    from flows.mine_keywords import mine_keywords
    from flows.nightly_retrain import nightly_retrain
    from flows.train import train_flow

    nightly = nightly_retrain.to_deployment(
        name="nightly-retrain",
        description="scheduled retraining: data -> candidate -> gate -> champion",
        schedules=[Cron(cron, timezone=timezone)] if schedules else [],
        concurrency_limit=1,
        parameters={"config_path": nightly_config} if nightly_config else {},
    )
    return [
        build_pairs.to_deployment(name="build-pairs", description="ingest -> split -> pair -> shuffle"),
        mine_keywords.to_deployment(name="mine-keywords", description="GSDMM topics -> keyword sequences"),
        train_flow.to_deployment(name="train", description="one training run: gur (shards), tfcsg (keywords), simcse"),
        evaluate.to_deployment(name="evaluate", description="models and baselines on the evaluation sets"),
        nightly,
    ]


def serve_all(limit: int = 2, **nightly) -> None:
    """`pause_on_shutdown=False`: schedules survive a restart; missed runs become Late and still run.
    `nightly`: cron, timezone, schedules, nightly_config (see `build_deployments`)."""
    from prefect import serve

    serve(*build_deployments(**nightly), pause_on_shutdown=False, limit=limit)


if __name__ == "__main__":
    serve_all(
        cron=os.environ.get("GUR_NIGHTLY_CRON", NIGHTLY_CRON), timezone=os.environ.get("GUR_NIGHTLY_TZ", NIGHTLY_TZ)
    )
