"""Serve every deployment from one long-running process.

With `prefect server start` running and `PREFECT_API_URL` pointing at it:
    python -m deployments.serve        (or `gur serve`)
    prefect deployment run build-pairs/build-pairs --watch
    prefect deployment run train/train -p preset=tiny -p steps=300
    prefect deployment run evaluate/evaluate -p 'models=["minilm","bm25"]'
Flow runs execute in this process's environment (its working directory and `GUR_HOME`).
"""

from __future__ import annotations

import os

os.environ.setdefault("DO_NOT_TRACK", "1")


def build_deployments() -> list:
    from flows.build_pairs import build_pairs
    from flows.evaluate import evaluate
    from flows.mine_keywords import mine_keywords
    from flows.train import train_flow

    return [
        build_pairs.to_deployment(name="build-pairs", description="ingest -> split -> pair -> shuffle"),
        mine_keywords.to_deployment(name="mine-keywords", description="GSDMM topics -> keyword sequences"),
        train_flow.to_deployment(name="train", description="one GUR training run on the newest shards"),
        evaluate.to_deployment(name="evaluate", description="models and baselines on the evaluation sets"),
    ]


def serve_all(limit: int = 2) -> None:
    """`pause_on_shutdown=False`: schedules survive a restart; missed runs become Late and still run."""
    from prefect import serve

    serve(*build_deployments(), pause_on_shutdown=False, limit=limit)


if __name__ == "__main__":
    serve_all()
