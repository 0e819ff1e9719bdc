"""`gur serve` keeps schedules made outside it: which schedules it owns (pure), then registering the
deployments twice against the test server, as a restart of `gur serve` does (`serve` registers
each deployment with `RunnerDeployment.aapply`; `apply` is the same call)."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

import pytest
from prefect.client.schemas.actions import DeploymentScheduleCreate
from prefect.client.schemas.objects import DeploymentSchedule
from prefect.client.schemas.schedules import CronSchedule, IntervalSchedule

from deployments.serve import NIGHTLY_SLUG, schedules_for

HOURLY = IntervalSchedule(interval=timedelta(hours=1))


def on_server(schedule, slug=None, active=True, parameters=None) -> DeploymentSchedule:
    return DeploymentSchedule(
        id=uuid4(), schedule=schedule, active=active, slug=slug, parameters=parameters or {}, deployment_id=uuid4()
    )


def product(cron: str = "0 2 * * *") -> DeploymentScheduleCreate:
    return DeploymentScheduleCreate(schedule=CronSchedule(cron=cron, timezone="UTC"), slug=NIGHTLY_SLUG)


def test_schedules_made_elsewhere_are_kept_as_they_are():
    mine = on_server(HOURLY, active=False, parameters={"steps": 5})
    (kept,) = schedules_for([mine], [])
    assert (kept.schedule, kept.active, kept.parameters, kept.slug) == (HOURLY, False, {"steps": 5}, None)


def test_the_nightly_schedule_is_ours_a_new_cron_replaces_it_and_a_pause_survives():
    old = on_server(CronSchedule(cron="0 2 * * *", timezone="UTC"), slug=NIGHTLY_SLUG, active=False)
    user = on_server(CronSchedule(cron="0 12 * * 1", timezone="UTC"))
    same = schedules_for([old, user], [product()])
    assert [(s.schedule.cron, s.slug, s.active) for s in same] == [
        ("0 12 * * 1", None, True),  # the user's, first
        ("0 2 * * *", NIGHTLY_SLUG, False),  # unchanged cron: still paused
    ]
    moved = schedules_for([old, user], [product("30 3 * * *")])
    assert [(s.schedule.cron, s.active) for s in moved] == [("0 12 * * 1", True), ("30 3 * * *", True)]
    assert [s.schedule.cron for s in schedules_for([old, user], [])] == ["0 12 * * 1"]  # --no-schedules


def test_a_slugless_copy_of_the_product_schedule_is_ours():
    legacy = on_server(CronSchedule(cron="0 2 * * *", timezone="UTC"))  # registered before schedules had slugs
    assert [s.slug for s in schedules_for([legacy], [product()])] == [NIGHTLY_SLUG]


@pytest.mark.usefixtures("prefect_harness")
def test_registering_again_keeps_a_schedule_created_with_the_cli(monkeypatch):
    from prefect.client.orchestration import get_client

    from deployments.serve import build_deployments, read_schedules

    def register(**nightly) -> dict[str, list]:
        for deployment in build_deployments(**nightly, existing=read_schedules()):
            deployment.apply()
        return read_schedules()

    register()
    with get_client(sync_client=True) as client:  # what `prefect deployment schedule create` does
        for name in ("train/train", "nightly-retrain/nightly-retrain"):
            deployment_id = client.read_deployment_by_name(name).id
            client.create_deployment_schedules(deployment_id, [DeploymentScheduleCreate(schedule=HOURLY)])
    after = register(cron="30 3 * * *", timezone="Europe/Berlin")  # a restart with another cron
    assert [s.schedule for s in after["train/train"]] == [HOURLY]
    assert after["build-pairs/build-pairs"] == []
    nightly = sorted(after["nightly-retrain/nightly-retrain"], key=lambda s: s.slug is None)
    assert [(s.slug, s.schedule) for s in nightly] == [
        (NIGHTLY_SLUG, CronSchedule(cron="30 3 * * *", timezone="Europe/Berlin")),
        (None, HOURLY),
    ]
    again = register(schedules=False)  # `gur serve --no-schedules`: only ours goes
    assert [s.schedule for s in again["nightly-retrain/nightly-retrain"]] == [HOURLY]
    assert [s.schedule for s in again["train/train"]] == [HOURLY]
