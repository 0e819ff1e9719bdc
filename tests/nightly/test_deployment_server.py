"""End to end as a user runs it: `prefect server start`, serve the deployments, trigger from the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import duckdb
import pytest

from samples.tiny_bert import tiny_bert
from samples.wiki_docs import wiki_documents, write_jsonl
from tests.helpers import REPO
from tests.helpers.servers import BIN, free_port, fresh_prefect_home, stop, wait_for


@pytest.mark.slow
def test_deployment_run_through_a_real_server(tmp_path, migrated_prefect_db):
    corpus = tmp_path / "docs.jsonl"
    doc = {"title": "Cats", "text": "Cats purr loudly. Cats purr softly.\nKittens play."}
    corpus.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    questions = tmp_path / "questions.tsv"
    questions.write_text(
        "id\ttitle\ttag\n0\tHow do I sort a list in python\tpython\n1\tpython list sort order\tpython\n"
        "2\tjava string to int\tjava\n3\tconvert a string to an int in java\tjava\n",
        encoding="utf-8",
    )
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(fresh_prefect_home(tmp_path / "prefect-home", migrated_prefect_db)),
        "PREFECT_API_URL": api,
        "GUR_HOME": str(tmp_path / "data"),
        "PREFECT_RUNNER_POLL_FREQUENCY": "2",
    }
    logs = tmp_path / "logs"
    logs.mkdir()
    server = subprocess.Popen(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=open(logs / "server.log", "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    serve = None
    try:
        wait_for(f"{api}/health", 180, server)
        serve = subprocess.Popen(
            [sys.executable, "-m", "deployments.serve"],
            cwd=REPO,
            env=env,
            stdout=open(logs / "serve.log", "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(f"{api}/deployments/name/build-pairs/build-pairs", 120, serve)
        run = subprocess.run(
            [str(BIN / "prefect"), "deployment", "run", "build-pairs/build-pairs", "--watch", "--watch-timeout", "240"]
            + ["-p", f"input_path={corpus}", "-p", "workers=1"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stdout + run.stderr + (logs / "serve.log").read_text()
        assert "Completed" in run.stdout
        con = duckdb.connect(str(tmp_path / "data" / "catalog.duckdb"), read_only=True)
        rows = con.execute("SELECT text FROM sentences ORDER BY sent_id").fetchall()
        shards = con.execute("SELECT a, b, lcs FROM shards").fetchall()
        con.close()
        assert rows == [("Cats",), ("Cats purr loudly.",), ("Cats purr softly.",), ("Kittens play.",)]
        assert shards == [("Cats purr loudly.", "Cats purr softly.", "cats purr ")]

        for name in ("mine-keywords/mine-keywords", "train/train", "evaluate/evaluate"):
            with urllib.request.urlopen(f"{api}/deployments/name/{name}", timeout=10) as response:
                assert json.load(response)["name"] == name.split("/")[1]
        run = subprocess.run(
            [str(BIN / "prefect"), "deployment", "run", "evaluate/evaluate", "--watch", "--watch-timeout", "240"]
            + ["-p", 'models=["bm25"]', "-p", f"stackoverflow={questions}", "-p", "stsb=[]"]
            + ["-p", "lee=false", "-p", "demo_retrieval=false"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stdout + run.stderr + (logs / "serve.log").read_text()
        con = duckdb.connect(str(tmp_path / "data" / "catalog.duckdb"), read_only=True)
        p_at_1 = con.execute(
            "SELECT value FROM metrics WHERE model = 'bm25' AND metric = 'precision' AND k = 1"
        ).fetchall()
        con.close()
        assert p_at_1 == [(1.0,)]  # each question's nearest other question shares its tag
        served_nights_on_an_unlabeled_folder(tmp_path, env, logs)
    finally:
        if serve is not None:
            stop(serve)
        stop(server)


def served_nights_on_an_unlabeled_folder(tmp_path: Path, env: dict, logs: Path) -> None:
    """`nightly-retrain` on a folder of JSONL documents without labels: the gate scores the label-free suite cut
    from held-out documents; the next night, with one new file, splits only that file."""
    docs = wiki_documents(100)
    folder = tmp_path / "unlabeled"
    folder.mkdir()
    write_jsonl(folder / "day1.jsonl", docs[:80])
    model = tiny_bert(tmp_path / "tiny-bert", [f"{d['title']} {d['text']}" for d in docs])
    config = tmp_path / "nightly.toml"
    options = "{eval_every = 0, threads = 1, lr = 1e-3, ckpt_every = 100, interpolate = 1.0}"
    config.write_text(
        f'[corpus]\npath = "{folder}"\n[train]\nmethod = "tfcsg"\ninit_from = "{model}"\npreset = "cpu"\n'
        f"steps = 10\noptions = {options}\n[keywords]\nk = 5\n[evaluate]\nholdout = 0.3\nstsb = []\n"
        "[gate]\nguards = {}\n",
        encoding="utf-8",
    )

    def night() -> list[tuple]:
        run = subprocess.run(
            [str(BIN / "prefect"), "deployment", "run", "nightly-retrain/nightly-retrain", "--watch"]
            + ["--watch-timeout", "400", "-p", f"config_path={config}"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=450,
        )
        assert run.returncode == 0, run.stdout + run.stderr + (logs / "serve.log").read_text()[-5000:]
        con = duckdb.connect(str(tmp_path / "data" / "catalog.duckdb"), read_only=True)
        rows = con.execute(
            "SELECT decision, suite, primary_metric, overlap, queries, files_new FROM promotions ORDER BY created_at"
        ).fetchall()
        con.close()
        return rows

    (first,) = night()
    assert first[0] in ("promoted", "refused") and first[1:4] == (
        "label-free: heldout-title, heldout-ict",
        "heldout-title/retrieval/mrr@10",
        0,
    )
    assert first[4] >= 10  # title queries of held-out documents, each paired between candidate and start
    mirror = next((tmp_path / "data" / "holdout").glob("*/train/day1.jsonl.jsonl"))
    before = {p: p.stat().st_mtime_ns for p in mirror.parents[1].rglob("day1.jsonl.jsonl")}
    write_jsonl(folder / "day2.jsonl", docs[80:])
    second = night()[-1]
    assert second[1] == "label-free: heldout-title, heldout-ict" and second[5] == 1
    assert {p: p.stat().st_mtime_ns for p in before} == before  # the first file was not split again
    assert (mirror.parent / "day2.jsonl.jsonl").exists()
