"""nightly-retrain under a real Prefect server and real serve processes: the cron schedule it is served
with, a triggered first night on a corpus folder, a second night after a new file landed in it (only
that file's work is done, and the decision says what came in), two runs at once kept to one at a
time, and a copy on a 5-second interval whose scheduled run completes on its own (the server's
scheduler loop runs every second)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from samples.tiny_bert import REPO, tiny_bert, titles  # noqa: E402
from tests.helpers.nightly_config import write_config
from tests.helpers.servers import (
    BIN,
    free_port,
    fresh_prefect_home,  # noqa: E402
    stop,
    wait_for,
)


def api_get(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def api_post(url: str, body: dict):
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def flow_runs(api: str, deployment_id: str) -> list[dict]:
    return api_post(f"{api}/flow_runs/filter", {"flow_runs": {"deployment_id": {"any_": [deployment_id]}}})


def wait_until(check, timeout: float, what: str, logs: Path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(1)
    raise TimeoutError(f"{what}; logs:\n" + "\n".join(p.read_text()[-3000:] for p in sorted(logs.glob("*.log"))))


def cron_far_from_now(timezone: str, now: datetime | None = None) -> str:
    """A daily cron 12 hours from now in `timezone`: it cannot fire while the test runs (a fixed `30 3 * * *`
    fired during a run at 02:30 UTC, took the new file, and the next triggered night found nothing new)."""
    later = (now or datetime.now(ZoneInfo(timezone))).astimezone(ZoneInfo(timezone)) + timedelta(hours=12)
    return f"{later.minute} {later.hour} * * *"


def test_the_schedule_never_falls_within_the_test():
    for hour, minute in [(3, 30), (3, 29), (15, 30), (23, 59), (0, 0)]:
        now = datetime(2026, 11, 28, hour, minute, tzinfo=ZoneInfo("Europe/Berlin"))
        minute_of, hour_of, *_ = cron_far_from_now("Europe/Berlin", now).split()
        fires = now.replace(hour=int(hour_of), minute=int(minute_of))
        gap = min((fires - now) % timedelta(days=1), (now - fires) % timedelta(days=1))
        assert gap >= timedelta(hours=11), (now, fires)


@pytest.mark.slow
def test_served_schedule_triggered_runs_and_an_interval_run(tmp_path, migrated_prefect_db):
    rows = titles(700)  # as test_nightly: a held-out share large enough for the paired test to see the gain
    corpus = tmp_path / "corpus"  # the folder new documents land in: the first 600 titles, then 100 more
    corpus.mkdir()
    write_labelled(corpus / "day1.tsv", rows[:600])
    model = tiny_bert(tmp_path / "tiny-bert", [r["title"] for r in rows])
    root = tmp_path / "data"
    root.mkdir()
    write_config(root / "nightly.toml", corpus, model, lr=1e-3)

    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    cron = cron_far_from_now("Europe/Berlin")
    env = {
        **os.environ,
        "PREFECT_HOME": str(fresh_prefect_home(tmp_path / "prefect-home", migrated_prefect_db)),
        "PREFECT_API_URL": api,
        "GUR_HOME": str(root),
        "PREFECT_RUNNER_POLL_FREQUENCY": "1",
        "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "1",
        # a run refused by the deployment's concurrency limit is retried after 2 s, not the default 30 s
        "PREFECT_SERVER_DEPLOYMENTS_CONCURRENCY_SLOT_WAIT_SECONDS": "2",
        "GUR_NIGHTLY_CRON": cron,
        "GUR_NIGHTLY_TZ": "Europe/Berlin",
        "PYTHONPATH": str(REPO),
    }
    logs = tmp_path / "logs"
    logs.mkdir()

    def start(cmd: list[str], name: str) -> subprocess.Popen:
        return subprocess.Popen(
            cmd,
            cwd=REPO,
            env=env,
            stdout=open(logs / f"{name}.log", "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    server = start([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)], "server")
    procs = [server]
    try:
        wait_for(f"{api}/health", 180, server)
        serve = start([sys.executable, "-m", "deployments.serve"], "serve")
        procs.append(serve)
        url = f"{api}/deployments/name/nightly-retrain/nightly-retrain"
        wait_for(url, 120, serve)
        deployment = api_get(url)
        schedule = deployment["schedules"][0]["schedule"]
        assert (schedule["cron"], schedule["timezone"]) == (cron, "Europe/Berlin")
        assert deployment["global_concurrency_limit"]["limit"] == 1

        # the first night, triggered by hand, promotes; then two runs at once: they never overlap
        run = subprocess.run(
            [str(BIN / "prefect"), "deployment", "run", "nightly-retrain/nightly-retrain", "--watch"]
            + ["--watch-timeout", "300"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=360,
        )
        assert run.returncode == 0 and "Completed" in run.stdout, run.stdout + run.stderr
        assert json.loads((root / "models" / "champion.json").read_text())["number"] == 1

        # a new file lands in the corpus folder; the next night ingests, and reports, only that file
        write_labelled(corpus / "day2.tsv", rows[600:])
        run = subprocess.run(
            [str(BIN / "prefect"), "deployment", "run", "nightly-retrain/nightly-retrain", "--watch"]
            + ["--watch-timeout", "300"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=360,
        )  # fmt: skip
        assert run.returncode == 0 and "Completed" in run.stdout, run.stdout + run.stderr
        second = latest_decision(root)
        assert second["decision"] in ("promoted", "refused"), second
        assert (second["files_new"], second["files_changed"], second["files_removed"]) == (1, 0, 0), second
        assert 60 <= second["documents_new"] <= 100 and second["documents_removed"] == 0, second  # minus held-out
        assert second["recomputed"].startswith("ingest built (1 files read, 1 reused); keywords built"), second
        for _ in range(2):
            subprocess.run(
                [str(BIN / "prefect"), "deployment", "run", "nightly-retrain/nightly-retrain"],
                cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=True,
            )  # fmt: skip

        def finished_runs(deployment_id: str, n: int):
            runs = flow_runs(api, deployment_id)
            done = [r for r in runs if r["state_type"] in ("COMPLETED", "FAILED", "CRASHED")]
            return done if len(done) >= n else None

        runs = wait_until(lambda: finished_runs(deployment["id"], 4), 240, "two triggered runs", logs)
        assert all(r["state_type"] == "COMPLETED" for r in runs), [r["state_name"] for r in runs]
        spans = sorted((r["start_time"], r["end_time"]) for r in runs)
        assert all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))
        stop(serve)
        procs.remove(serve)

        # a copy of the flow served on a 5-second interval: the server schedules it, serve runs it
        every = start(
            [
                sys.executable,
                "-c",
                "from flows.nightly_retrain import nightly_retrain as f; "
                "f.serve(name='every-5s', interval=5, limit=1, pause_on_shutdown=False)",
            ],
            "interval",
        )
        procs.append(every)
        wait_for(f"{api}/deployments/name/nightly-retrain/every-5s", 120, every)
        copy = api_get(f"{api}/deployments/name/nightly-retrain/every-5s")
        assert copy["schedules"][0]["schedule"]["interval"] == 5.0
        done = wait_until(lambda: finished_runs(copy["id"], 1), 240, "a scheduled run", logs)
        assert done[0]["state_type"] == "COMPLETED" and done[0]["auto_scheduled"]
    finally:
        for proc in reversed(procs):
            stop(proc)
    import duckdb

    con = duckdb.connect(str(root / "catalog.duckdb"), read_only=True)
    decisions = [d for (d,) in con.execute("SELECT decision FROM promotions ORDER BY created_at").fetchall()]
    con.close()
    assert decisions[0] == "promoted" and decisions[1] in ("promoted", "refused")
    assert set(decisions[2:]) == {"nothing-new"} and len(decisions) >= 5


def write_labelled(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, delimiter="\t").writerows(
            [["id", "title", "tag"], *([r["id"], r["title"], r["tag"]] for r in rows)]
        )
    return path


def latest_decision(root: Path) -> dict:
    """The newest `promotions` row, read from its Parquet file (no catalog needed)."""
    import pyarrow.parquet as pq

    newest = max((root / "models" / "promotions").glob("part-*.parquet"), key=lambda p: int(p.stem.split("-")[1]))
    return pq.read_table(newest).to_pylist()[0]
