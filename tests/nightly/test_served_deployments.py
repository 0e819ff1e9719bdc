"""The deployments as a user runs them: `prefect server start`, `python -m deployments.serve`, runs triggered from
the CLI. One server and one serve process for the module (each costs seconds of CPU to start): build-pairs and
evaluate with parameters; nightly-retrain with the cron schedule it is served with, a triggered first night on a
corpus folder with its config and root as parameters, a second night after a new file landed in it (only that
file's work is done, and the decision says what came in), two runs at once kept to one at a time; and a copy on a
5-second interval whose scheduled run completes on its own (the server's scheduler loop runs every second). A
night on an unlabeled folder (the label-free suite) runs in process: tests/nightly/test_nightly_recipe.py."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb
import pytest

from samples.tiny_bert import tiny_bert, titles
from tests.helpers import REPO
from tests.helpers.nightly_config import write_config
from tests.helpers.servers import BIN, free_port, fresh_prefect_home, stop, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.soak]  # the server and serve process alone cost 36 worker-s


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


def cron_far_from_now(timezone: str, now: datetime | None = None) -> str:
    """A daily cron 12 hours from now in `timezone`: it cannot fire while the test runs (a fixed `30 3 * * *`
    fired during a run at 02:30 UTC, took the new file, and the next triggered night found nothing new)."""
    later = (now or datetime.now(ZoneInfo(timezone))).astimezone(ZoneInfo(timezone)) + timedelta(hours=12)
    return f"{later.minute} {later.hour} * * *"


@dataclass
class Served:
    """The module's server and serve process, their environment (GUR_HOME is `root`) and logs."""

    base: Path
    root: Path
    api: str
    cron: str
    env: dict[str, str]
    logs: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def start(self, cmd: list[str], name: str) -> subprocess.Popen:
        proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            env=self.env,
            stdout=open(self.logs / f"{name}.log", "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs[name] = proc
        return proc

    def run(self, deployment: str, *params: str, watch: int = 300) -> subprocess.CompletedProcess:
        """`prefect deployment run DEPLOYMENT --watch -p ...`, as a user triggers it."""
        cmd = [str(BIN / "prefect"), "deployment", "run", deployment, "--watch", "--watch-timeout", str(watch)]
        cmd += [word for param in params for word in ("-p", param)]
        run = subprocess.run(cmd, cwd=REPO, env=self.env, capture_output=True, text=True, timeout=watch + 60)
        assert run.returncode == 0 and "Completed" in run.stdout, run.stdout + run.stderr + self.log_tails()
        return run

    def log_tails(self) -> str:
        return "\nlogs:\n" + "\n".join(p.read_text()[-3000:] for p in sorted(self.logs.glob("*.log")))

    def wait_until(self, check, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = check()
            if result:
                return result
            time.sleep(1)
        raise TimeoutError(what + self.log_tails())


@pytest.fixture(scope="module")
def served(tmp_path_factory, migrated_prefect_db):
    base = tmp_path_factory.mktemp("served")
    root = base / "data"
    root.mkdir()
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    cron = cron_far_from_now("Europe/Berlin")
    env = {
        **os.environ,
        "PREFECT_HOME": str(fresh_prefect_home(base / "prefect-home", migrated_prefect_db)),
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
    logs = base / "logs"
    logs.mkdir()
    served = Served(base, root, api, cron, env, logs)
    try:
        server = served.start(
            [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)], "server"
        )
        wait_for(f"{api}/health", 180, server)
        serve = served.start([sys.executable, "-m", "deployments.serve"], "serve")
        wait_for(f"{api}/deployments/name/nightly-retrain/nightly-retrain", 120, serve)
        yield served
    finally:
        for proc in reversed(list(served.procs.values())):
            stop(proc)


def test_the_schedule_never_falls_within_the_test():
    for hour, minute in [(3, 30), (3, 29), (15, 30), (23, 59), (0, 0)]:
        now = datetime(2026, 11, 28, hour, minute, tzinfo=ZoneInfo("Europe/Berlin"))
        minute_of, hour_of, *_ = cron_far_from_now("Europe/Berlin", now).split()
        fires = now.replace(hour=int(hour_of), minute=int(minute_of))
        gap = min((fires - now) % timedelta(days=1), (now - fires) % timedelta(days=1))
        assert gap >= timedelta(hours=11), (now, fires)


def test_build_pairs_and_evaluate_run_with_the_parameters_given_on_the_command_line(served):
    corpus = served.base / "docs.jsonl"
    doc = {"title": "Cats", "text": "Cats purr loudly. Cats purr softly.\nKittens play."}
    corpus.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    questions = served.base / "questions.tsv"
    questions.write_text(
        "id\ttitle\ttag\n0\tHow do I sort a list in python\tpython\n1\tpython list sort order\tpython\n"
        "2\tjava string to int\tjava\n3\tconvert a string to an int in java\tjava\n",
        encoding="utf-8",
    )
    root = served.base / "pairs-root"  # not the nights' root, whose promotions the schedule test counts
    served.run("build-pairs/build-pairs", f"input_path={corpus}", "workers=1", f"root={root}", watch=240)
    with duckdb.connect(str(root / "catalog.duckdb"), read_only=True) as con:
        rows = con.execute("SELECT text FROM sentences ORDER BY sent_id").fetchall()
        shards = con.execute("SELECT a, b, lcs FROM shards").fetchall()
    assert rows == [("Cats",), ("Cats purr loudly.",), ("Cats purr softly.",), ("Kittens play.",)]
    assert shards == [("Cats purr loudly.", "Cats purr softly.", "cats purr ")]

    for name in ("mine-keywords/mine-keywords", "train/train", "evaluate/evaluate", "embed/embed", "sts/sts"):
        assert api_get(f"{served.api}/deployments/name/{name}")["name"] == name.split("/")[1]
    served.run(
        "evaluate/evaluate", 'models=["bm25"]', f"stackoverflow={questions}", "stsb=[]", "lee=false",
        "demo_retrieval=false", f"root={root}", watch=240,
    )  # fmt: skip
    with duckdb.connect(str(root / "catalog.duckdb"), read_only=True) as con:
        p_at_1 = con.execute(
            "SELECT value FROM metrics WHERE model = 'bm25' AND metric = 'precision' AND k = 1"
        ).fetchall()
    assert p_at_1 == [(1.0,)]  # each question's nearest other question shares its tag


def test_served_schedule_triggered_runs_and_an_interval_run(served):
    """Last in the module: it stops the module's serve process to serve the interval copy alone."""
    root, api = served.root, served.api
    rows = titles(700)  # as test_nightly: a held-out share large enough for the paired test to see the gain
    corpus = served.base / "corpus"  # the folder new documents land in: the first 600 titles, then 100 more
    corpus.mkdir()
    write_labelled(corpus / "day1.tsv", rows[:600])
    model = tiny_bert(served.base / "tiny-bert", [r["title"] for r in rows])
    config = write_config(served.base / "night.toml", corpus, model, lr=1e-3)

    deployment = api_get(f"{api}/deployments/name/nightly-retrain/nightly-retrain")
    schedule = deployment["schedules"][0]["schedule"]
    assert (schedule["cron"], schedule["timezone"]) == (served.cron, "Europe/Berlin")
    assert deployment["global_concurrency_limit"]["limit"] == 1

    # the first night, triggered by hand with its config and root as parameters (the root holds no nightly.toml
    # yet: a night that ignored them would fail), promotes
    assert not (root / "nightly.toml").exists()
    served.run("nightly-retrain/nightly-retrain", f"config_path={config}", f"root={root}")
    assert json.loads((root / "models" / "champion.json").read_text())["number"] == 1
    (root / "nightly.toml").write_bytes(config.read_bytes())  # the later runs take the defaults, as scheduled ones

    # a new file lands in the corpus folder; the next night ingests, and reports, only that file; then two runs
    # at once: they never overlap
    write_labelled(corpus / "day2.tsv", rows[600:])
    served.run("nightly-retrain/nightly-retrain")
    second = latest_decision(root)
    assert second["decision"] in ("promoted", "refused"), second
    assert (second["files_new"], second["files_changed"], second["files_removed"]) == (1, 0, 0), second
    assert 60 <= second["documents_new"] <= 100 and second["documents_removed"] == 0, second  # minus held-out
    assert second["recomputed"].startswith("ingest built (1 files read, 1 reused); keywords built"), second
    for _ in range(2):
        subprocess.run(
            [str(BIN / "prefect"), "deployment", "run", "nightly-retrain/nightly-retrain"],
            cwd=REPO, env=served.env, capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip

    def finished_runs(deployment_id: str, n: int):
        runs = flow_runs(api, deployment_id)
        done = [r for r in runs if r["state_type"] in ("COMPLETED", "FAILED", "CRASHED")]
        return done if len(done) >= n else None

    runs = served.wait_until(lambda: finished_runs(deployment["id"], 4), 240, "two triggered runs")
    assert all(r["state_type"] == "COMPLETED" for r in runs), [r["state_name"] for r in runs]
    spans = sorted((r["start_time"], r["end_time"]) for r in runs)
    assert all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))
    stop(served.procs.pop("serve"))

    # a copy of the flow served on a 5-second interval: the server schedules it, serve runs it
    every = served.start(
        [
            sys.executable,
            "-c",
            "from flows.nightly_retrain import nightly_retrain as f; "
            "f.serve(name='every-5s', interval=5, limit=1, pause_on_shutdown=False)",
        ],
        "interval",
    )
    wait_for(f"{api}/deployments/name/nightly-retrain/every-5s", 120, every)
    copy = api_get(f"{api}/deployments/name/nightly-retrain/every-5s")
    assert copy["schedules"][0]["schedule"]["interval"] == 5.0
    done = served.wait_until(lambda: finished_runs(copy["id"], 1), 240, "a scheduled run")
    assert done[0]["state_type"] == "COMPLETED" and done[0]["auto_scheduled"]
    stop(served.procs.pop("interval"))

    with duckdb.connect(str(root / "catalog.duckdb"), read_only=True) as con:
        decisions = [d for (d,) in con.execute("SELECT decision FROM promotions ORDER BY created_at").fetchall()]
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
