"""Serve every deployment from one long-running process.

With `prefect server start` running and `PREFECT_API_URL` pointing at it:
    python -m deployments.serve        (or `gur serve`)
    prefect deployment run build-pairs/build-pairs --watch
    prefect deployment run train/train -p preset=tiny -p steps=300
    prefect deployment run train/train -p method=tfcsg -p preset=cpu
    prefect deployment run evaluate/evaluate -p 'models=["minilm","bm25"]'
    prefect deployment run build-pairs/build-pairs -p dask=tcp://scheduler:8786   # or -p dask=local -p workers=4
    prefect deployment run sts/sts -p 'families=["glove","lstm"]'
    prefect deployment run embed/embed -p model=minilm          # default: the champion
Flow runs execute in this process's environment (its working directory and `GUR_HOME`).
`nightly-retrain/nightly-retrain` runs on a cron schedule (default 02:00 UTC; `gur serve --cron
--timezone`, or `--no-schedules`); `GUR_NIGHTLY_CRON` / `GUR_NIGHTLY_TZ` set it for this module.

Who owns which schedule: serving re-registers every deployment, and Prefect's server replaces a
deployment's schedules with the ones registered. `gur serve` owns one schedule, nightly-retrain's,
marked with the slug `gur-nightly` (a restart with another `--cron` replaces it; a pause made in
the UI survives a restart with the same cron). Every other schedule on the server (made with
`prefect deployment schedule create` or in the UI, on any deployment) is read before serving and
registered again as it is, so a restart of `gur serve` keeps it.
"""

from __future__ import annotations

import os

os.environ.setdefault("DO_NOT_TRACK", "1")


NIGHTLY_CRON = "0 2 * * *"
NIGHTLY_TZ = "UTC"
NIGHTLY_SLUG = "gur-nightly"  # the one schedule `gur serve` owns (see the module docstring)
DEPLOYMENTS = (
    "build-pairs/build-pairs",
    "mine-keywords/mine-keywords",
    "train/train",
    "evaluate/evaluate",
    "nightly-retrain/nightly-retrain",
    "sts/sts",
    "embed/embed",
)


def schedules_for(existing: list, product: list) -> list:
    """What to register a deployment with: the server's `existing` schedules that `gur serve` does not
    own, as they are (active or paused, parameters, slug), then the `product` ones (DeploymentScheduleCreate).

    Ours: slug `gur-nightly`, or no slug and equal to a product schedule (what `gur serve` registered
    before it set slugs). A product schedule that is unchanged on the server keeps its `active` flag.
    """
    from prefect.client.schemas.actions import DeploymentScheduleCreate

    kept, active = [], {}
    for s in existing:
        if s.slug == NIGHTLY_SLUG or (s.slug is None and any(s.schedule == p.schedule for p in product)):
            active.update({p.slug: s.active for p in product if (p.slug, p.schedule) == (s.slug, s.schedule)})
            continue
        fields = dict(schedule=s.schedule, active=s.active, parameters=s.parameters or {}, slug=s.slug)
        if s.max_scheduled_runs is not None:
            fields["max_scheduled_runs"] = s.max_scheduled_runs
        kept.append(DeploymentScheduleCreate(**fields))
    return kept + [p.model_copy(update={"active": active.get(p.slug, p.active)}) for p in product]


def read_schedules(names: tuple[str, ...] = DEPLOYMENTS) -> dict[str, list]:
    """{deployment name: its schedules on the server} (an unknown deployment has none)."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    found: dict[str, list] = {}
    with get_client(sync_client=True) as client:
        for name in names:
            try:
                found[name] = list(client.read_deployment_by_name(name).schedules or [])
            except ObjectNotFound:
                found[name] = []
    return found


def build_deployments(
    cron: str = NIGHTLY_CRON,
    timezone: str = NIGHTLY_TZ,
    schedules: bool = True,
    nightly_config: str | None = None,
    existing: dict[str, list] | None = None,
) -> list:
    """Every deployment; `nightly-retrain/nightly-retrain` on `cron` in `timezone` (no schedule with
    `schedules=False`) with a concurrency limit of 1, reading `nightly_config` (default `<root>/nightly.toml`).
    `existing`: the server's schedules by deployment name (`read_schedules`), registered again unless ours."""
    from prefect.client.schemas.actions import DeploymentScheduleCreate
    from prefect.schedules import Cron

    from flows.build_pairs import build_pairs
    from flows.embed import embed_flow
    from flows.evaluate import evaluate
    from flows.mine_keywords import mine_keywords
    from flows.nightly_retrain import nightly_retrain
    from flows.sts import sts
    from flows.train import train_flow

    existing = existing or {}
    nightly = [DeploymentScheduleCreate.from_schedule(Cron(cron, timezone=timezone, slug=NIGHTLY_SLUG))]

    def on(name: str, product: list | None = None) -> list:
        return schedules_for(existing.get(name, []), product or [])

    return [
        build_pairs.to_deployment(
            name="build-pairs", description="ingest -> split -> pair -> shuffle", schedules=on(DEPLOYMENTS[0])
        ),
        mine_keywords.to_deployment(
            name="mine-keywords", description="GSDMM topics -> keyword sequences", schedules=on(DEPLOYMENTS[1])
        ),
        train_flow.to_deployment(
            name="train",
            description="one training run: gur (shards), tfcsg (keywords), simcse",
            schedules=on(DEPLOYMENTS[2]),
        ),
        evaluate.to_deployment(
            name="evaluate", description="models and baselines on the evaluation sets", schedules=on(DEPLOYMENTS[3])
        ),
        nightly_retrain.to_deployment(
            name="nightly-retrain",
            description="scheduled retraining: data -> candidate -> gate -> champion",
            schedules=on(DEPLOYMENTS[4], nightly if schedules else []),
            concurrency_limit=1,
            parameters={"config_path": nightly_config} if nightly_config else {},
        ),
        sts.to_deployment(
            name="sts", description="supervised STS-B: the survey's model families", schedules=on(DEPLOYMENTS[5])
        ),
        embed_flow.to_deployment(
            name="embed",
            description="documents x a model (default: the champion) -> embeddings",
            schedules=on(DEPLOYMENTS[6]),
        ),
    ]


def serve_all(limit: int = 2, **nightly) -> None:
    """`pause_on_shutdown=False`: schedules survive a restart; missed runs become Late and still run.
    Schedules made outside `gur serve` are read first and kept. `nightly`: cron, timezone, schedules,
    nightly_config (see `build_deployments`)."""
    from prefect import serve

    serve(*build_deployments(**nightly, existing=read_schedules()), pause_on_shutdown=False, limit=limit)


if __name__ == "__main__":
    serve_all(
        cron=os.environ.get("GUR_NIGHTLY_CRON", NIGHTLY_CRON), timezone=os.environ.get("GUR_NIGHTLY_TZ", NIGHTLY_TZ)
    )
