"""Nightly retraining in process: the gate by hand, first night promotes, an unchanged corpus is a no-op,
a destroyed candidate is refused, manual promote and rollback, the root lock, the config's errors."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest

from samples.tiny_bert import tiny_bert, titles  # noqa: E402
from storage.champion import (  # noqa: E402
    NightlyBusy,
    history,
    promote_by_hand,
    read_champion,
    record_decision,
    roll_back,
    rollback,
    rolled_back,
    root_lock,
    set_champion,
)
from tasks.nightly.config import load_nightly_config  # noqa: E402
from tasks.nightly.gate import Decision, gate, refuse_rolled_back  # noqa: E402
from tasks.nightly.significance import paired_test  # noqa: E402
from tests.helpers.gur_subprocess import gur_env
from tests.helpers.nightly_config import mixed_folder, write_config


def test_gate_by_hand():
    champ = {"p": 0.80, "s": 0.85}
    # a gain clearly above its noise: every one of 100 queries up by .02
    clear = paired_test(np.full(100, 0.82), np.full(100, 0.80))
    assert gate({"p": 0.82, "s": 0.845}, champ, "p", 0.01, {"s": 0.01}, clear).promote
    refused = gate({"p": 0.82, "s": 0.85}, champ, "p", 0.05, {"s": 0.01}, clear)
    assert not refused.promote and "does not clear the margin 0.05" in refused.reason
    guard = gate({"p": 0.82, "s": 0.80}, champ, "p", 0.0, {"s": 0.01}, clear)
    assert not guard.promote and "guard s drops 0.0500" in guard.reason
    missing = gate({"s": 0.9}, champ, "p", 0.0, {}, clear)
    assert not missing.promote and "p was not measured for the candidate" in missing.reason
    assert not gate({"p": 0.8}, {"p": 0.8}, "p", 0.0, {}, None).promote  # no per-query values: no evidence
    leaked = gate({"p": 0.82}, {"p": 0.80}, "p", 0.0, {}, clear, overlap=30, refusal="a suite that leaked")
    assert not leaked.promote and leaked.reason == "a suite that leaked"
    # queries whose texts the candidate trained on were left out of the test: judged on the rest, and said
    fair = gate({"p": 0.82}, {"p": 0.80}, "p", 0.0, {}, clear, overlap=1, dropped=2)
    assert fair.promote and "over 100 queries (2 left out: the candidate trained on their texts)" in fair.reason
    unknown = gate({"p": 0.82}, {"p": 0.80}, "p", 0.0, {}, clear, overlap=None)
    assert not unknown.promote and "an unknown number of texts" in unknown.reason


def test_a_tie_or_a_noisy_gain_does_not_promote():
    """Today's rule (gain >= margin 0) promoted both; the paired test refuses both."""
    tie = paired_test(np.array([1.0, 0.0] * 50), np.array([1.0, 0.0] * 50))
    assert not gate({"p": 0.5}, {"p": 0.5}, "p", 0.0, {}, tie).promote
    # 100 queries of P@1: the candidate wins 6 and loses 4 (gain +.02): within the noise, p ~ .38
    cand, champ = np.zeros(100), np.zeros(100)
    cand[:6], champ[6:10] = 1.0, 1.0
    noisy = paired_test(cand, champ)
    decision = gate({"p": 0.06}, {"p": 0.04}, "p", 0.0, {}, noisy)
    assert not decision.promote and "p = 0.3" in decision.reason and noisy.low < 0 < noisy.high


def test_champion_pointer_history_and_rollback(tmp_path):
    assert read_champion(tmp_path) is None
    first = set_champion(tmp_path, {"export": "/a"})
    second = set_champion(tmp_path, {"export": "/b"})
    assert (first["number"], second["number"]) == (1, 2) and read_champion(tmp_path)["export"] == "/b"
    assert second["previous"] == 1 and first["previous"] is None
    assert not list((tmp_path / "models").rglob(".*"))  # atomic writes leave no temp files
    current, restored = rollback(tmp_path)
    assert current["export"] == "/b" and restored["export"] == "/a" and read_champion(tmp_path)["export"] == "/a"
    with pytest.raises(ValueError, match="is the first"):
        rollback(tmp_path)
    assert [p["export"] for p in history(tmp_path)] == ["/a", "/b"]  # nothing is deleted


def test_rollback_walks_the_recorded_predecessor_and_sticks(tmp_path):
    set_champion(tmp_path, {"export": "/a"})  # 1
    set_champion(tmp_path, {"export": "/b"})  # 2, bad
    rollback(tmp_path)  # back to 1; /b is marked
    assert set(rolled_back(tmp_path)) == {"/b"}
    set_champion(tmp_path, {"export": "/c"})  # 3, replaces 1
    current, restored = rollback(tmp_path)
    assert (current["export"], restored["export"]) == ("/c", "/a")  # not /b, the highest older number
    good = Decision(True, "gain")
    assert not refuse_rolled_back(tmp_path, "/b", good).promote  # a night never brings /b back
    assert "only `gur promote` brings it back" in refuse_rolled_back(tmp_path, "/b", good).reason
    assert refuse_rolled_back(tmp_path, "/d", good).promote


def test_promote_and_rollback_take_the_root_lock_and_are_recorded(tmp_path):
    model = tiny_bert(tmp_path / "m1", ["a b c"])
    other = tiny_bert(tmp_path / "m2", ["a b c"])
    with root_lock(tmp_path, "flow run 'night'"):
        with pytest.raises(NightlyBusy, match="night"):
            promote_by_hand(tmp_path, model)
        with pytest.raises(NightlyBusy, match="night"):
            roll_back(tmp_path)
    promote_by_hand(tmp_path, model)
    promote_by_hand(tmp_path, other, "try it")
    roll_back(tmp_path)
    assert set(rolled_back(tmp_path)) == {str(other)}
    promote_by_hand(tmp_path, other, "back by hand")  # by hand it may come back, and the mark goes
    assert rolled_back(tmp_path) == {} and read_champion(tmp_path)["export"] == str(other)
    rows = pq.read_table(tmp_path / "models" / "promotions").to_pylist()
    assert sorted((r["decision"], r["reason"]) for r in rows)[-1] == ("rollback", "champion #2 rolled back to #1")


def _promote_many(root: str, tag: int) -> None:
    for i in range(10):
        set_champion(Path(root), {"export": f"/{tag}/{i}"})


def test_history_numbers_are_allocated_atomically(tmp_path):
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_promote_many, args=(str(tmp_path), tag)) for tag in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    entries = history(tmp_path)
    assert len(entries) == 40 and len({e["export"] for e in entries}) == 40  # no entry overwritten
    assert [e["number"] for e in entries] == list(range(1, 41))


def test_a_failed_night_writes_a_failed_row(tmp_path):
    from flows.nightly_retrain import nightly_steps

    path = tmp_path / "nightly.toml"
    (tmp_path / "questions").mkdir()  # short texts without labels: no suite can be cut from them
    (tmp_path / "questions" / "q.tsv").write_text("id\ttitle\n" + "".join(f"{i}\tquestion {i}\n" for i in range(50)))
    path.write_text(
        '[corpus]\npath = "questions"\ntext_field = "title"\ntitle_field = ""\n[gate]\nguards = {}\n'
        "[evaluate]\nstsb = []\n"
    )
    with pytest.raises(ValueError, match="Name a small labelled suite in \\[evaluate\\] stackoverflow: a TSV"):
        nightly_steps(load_nightly_config(path), tmp_path / "data", "night-1")
    (row,) = pq.read_table(tmp_path / "data" / "models" / "promotions").to_pylist()
    assert row["decision"] == "failed" and row["flow_run"] == "night-1" and "no labels ('tag')" in row["error"]


def test_lock_refuses_a_second_holder_and_frees_on_exit(tmp_path):
    with root_lock(tmp_path, "flow run 'first'"):
        with pytest.raises(NightlyBusy, match="held by flow run 'first'"):
            with root_lock(tmp_path, "flow run 'second'"):
                pass
    with root_lock(tmp_path, "flow run 'third'"):  # released
        pass


def test_config_errors_name_the_file_and_key(tmp_path):
    path = tmp_path / "nightly.toml"
    path.write_text('[corpus]\npath = "docs"\n[train]\nmethd = "tfcsg"\n[evaluate]\nstsb = ["a.csv"]\n')
    with pytest.raises(ValueError, match=r"nightly.toml: \[train\] has unknown keys \['methd'\]"):
        load_nightly_config(path)
    path.write_text('[corpus]\npath = "docs"\n[evaluate]\nholdout = 0\n')
    with pytest.raises(ValueError, match=r"\[evaluate\] needs a question suite"):
        load_nightly_config(path)
    path.write_text('[corpus]\npath = "docs"\n[evaluate]\nstsb = []\n')  # the default STS guard needs its set
    with pytest.raises(ValueError, match=r"\[gate\] guards 'stsb-en-train/sts/spearman' names a dataset"):
        load_nightly_config(path)
    path.write_text('[corpus]\npath = "docs"\n[gate]\nconfidence = 95\n')
    with pytest.raises(ValueError, match=r"\[gate\] confidence must be in \[0.5, 1\)"):
        load_nightly_config(path)
    path.write_text('[corpus]\npath = "docs"\n')  # no [evaluate]: the default suite and gate
    cfg = load_nightly_config(path)
    assert cfg.evaluate.holdout == 0.2 and not cfg.evaluate.stackoverflow  # a held-out share, not a training file
    assert cfg.evaluate.stsb[0].endswith("stsb-en-train.csv")  # dev is reported, never chosen on
    assert cfg.gate.guards == {"stsb-en-train/sts/spearman": 0.01} and cfg.gate.confidence == 0.95
    assert cfg.gate.primary == "auto" and not cfg.notes  # the suite's own metric, chosen each night
    (tmp_path / "dev.csv").write_text("a cat,a cat,5.0\n")  # a named guard set must exist (checked at load)
    path.write_text(
        '[corpus]\npath = "docs"\n[evaluate]\nstsb = ["dev.csv"]\nstackoverflow = "q.tsv"\n[gate]\n'
        'primary = "stackoverflow-q/question_retrieval/precision@1"\nguards = {"dev/sts/spearman" = 0.02}\n'
    )
    cfg = load_nightly_config(path)
    assert cfg.corpus.path == str(tmp_path / "docs") and cfg.evaluate.stsb == [str(tmp_path / "dev.csv")]


def test_without_the_sts_b_file_the_default_guard_is_lee_50_and_a_named_missing_file_is_one_clear_error(
    tmp_path, monkeypatch
):
    """A user's machine has no ../shared: the default guard must not refuse every night."""
    monkeypatch.setenv("GUR_SHARED_DATA", str(tmp_path / "no-shared-data"))
    path = tmp_path / "nightly.toml"
    path.write_text('[corpus]\npath = "docs"\n')
    cfg = load_nightly_config(path)
    assert cfg.evaluate.stsb == [] and cfg.evaluate.lee and cfg.gate.guards == {"lee-50/sts/spearman": 0.02}
    assert len(cfg.notes) == 1 and "stsb-en-train.csv is not on this machine" in cfg.notes[0]
    path.write_text('[corpus]\npath = "docs"\n[evaluate]\nstsb = ["stsb-en-train.csv"]\n')
    with pytest.raises(ValueError, match=r"\[evaluate\] stsb names .*stsb-en-train.csv, which is not on this machine"):
        load_nightly_config(path)
    path.write_text('[corpus]\npath = "docs"\n[gate]\nguards = {"stsb-en-train/sts/spearman" = 0.01}\n')
    with pytest.raises(ValueError, match=r"\[gate\] guards name stsb-en-train, whose default file .* is not on"):
        load_nightly_config(path)
    path.write_text('[corpus]\npath = "docs"\n[gate]\nguards = {}\n')  # the guard off: no STS set scored
    cfg = load_nightly_config(path)
    assert cfg.evaluate.stsb == [] and not cfg.evaluate.lee and not cfg.notes


def test_a_changed_preset_is_something_new_to_train(tmp_path, monkeypatch):
    """The same nightly.toml after a release that changed the `cpu` preset's values must not be "nothing new"."""
    from models.training import presets as train_presets
    from tasks.nightly.report import training_settings

    path = tmp_path / "nightly.toml"
    path.write_text('[corpus]\npath = "docs"\n[train]\nmethod = "tfcsg"\npreset = "cpu"\n')
    cfg = load_nightly_config(path)
    before = training_settings(cfg.train, cfg.keywords)
    again = load_nightly_config(path)
    assert training_settings(again.train, again.keywords) == before  # stable: same file, same preset
    monkeypatch.setitem(train_presets.PRESETS, "cpu", {**train_presets.PRESETS["cpu"], "s2s_weight": 3.0})
    assert training_settings(cfg.train, cfg.keywords) != before
    # the documents recipe's preset counts by its values too
    documents = replace(cfg.train, method="documents")
    before = training_settings(documents, cfg.keywords)
    preset = train_presets.DOCUMENT_PRESETS["cpu"]
    changed = {**preset, "passage_len": 2 * preset["passage_len"]}
    monkeypatch.setitem(train_presets.DOCUMENT_PRESETS, "cpu", changed)
    assert training_settings(documents, cfg.keywords) != before


PRIMARY = "stackoverflow-holdout/question_retrieval/precision@1"  # the held-out share of the corpus


@pytest.fixture(scope="module")
def nightly(tmp_path_factory):
    base = tmp_path_factory.mktemp("nightly")
    rows = titles(600)
    model = tiny_bert(base / "tiny-bert", [r["title"] for r in rows])
    return {"base": base, "corpus": mixed_folder(base / "corpus", rows), "model": model, "root": base / "data"}


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.slow
def test_nights(nightly):
    from datetime import UTC, datetime

    from flows.nightly_retrain import nightly_retrain
    from gur_cli import main as gur
    from tests.helpers.flow_runs import task_runs_since

    root, base = nightly["root"], nightly["base"]
    good = write_config(base / "good.toml", nightly["corpus"], nightly["model"], lr=1e-3)

    since = datetime.now(UTC)
    first = nightly_retrain(config_path=str(good), root=str(root))
    assert first["decision"] == "promoted", first["reason"]
    # its flows (data stages, training, evaluation, embedding) hand their outputs up: the night refreshes the
    # catalog before its retention, after its row and after its embedding, not once per flow
    assert task_runs_since("update-catalog", since) == 3
    # the embeddings view shows what search serves: every title of the folder, held-out ones included
    from tasks.embed.outputs import read_active

    embedded = json.loads((root / read_active(root)["path"] / "_manifest.json").read_text())["rows"]["embeddings"]
    con = duckdb.connect(str(root / "catalog.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM embeddings").fetchone()[0] == embedded == 600
    con.close()
    assert "against the initial model" in first["reason"]
    champion = read_champion(root)
    assert champion["export"] == first["candidate"] and champion["number"] == 1
    assert first["gain_low"] > 0 and first["p_value"] < 0.05 and first["overlap"] == 0 and first["queries"] > 100
    # the gate scored titles the candidate never trained on
    suite = next(root.glob("holdout/*/holdout.tsv"))
    trained = {r["text"] for r in pq.read_table(next(root.glob("keywords/*/part-*.parquet"))).to_pylist()}
    with open(suite, encoding="utf-8") as f:
        held = {line.split("\t")[1] for line in f.readlines()[1:]}
    assert held and not held & trained

    second = nightly_retrain(config_path=str(good), root=str(root))
    assert second["decision"] == "nothing-new" and read_champion(root) == champion

    # the preset as shipped: the candidate's export is its trained weights mixed 0.75 with the champion's
    worse = write_config(base / "worse.toml", nightly["corpus"], nightly["model"], lr=3.0, interpolate=None)
    third = nightly_retrain(config_path=str(worse), root=str(root))
    assert third["decision"] == "refused", third["reason"]
    assert third["champion"] == champion["export"] and "against champion #1" in third["reason"]
    assert third["candidate_metrics"][PRIMARY] < third["champion_metrics"][PRIMARY]
    assert read_champion(root) == champion  # the pointer stays
    mixed = json.loads((Path(third["candidate"]).parent / "_manifest.json").read_text())
    assert mixed["config"]["interpolate"] == 0.75  # trained from the champion, named relative to the root
    assert str(root / mixed["config"]["init_from"]) == champion["export"]
    assert (root / mixed["unmixed"]["path"] / "summary.json").exists()  # the training ran in its own folder

    # a second run while one holds the data root is refused at once, naming the holder
    with root_lock(root, "flow run 'busy-test'"):
        with pytest.raises(NightlyBusy, match="busy-test"):
            nightly_retrain(config_path=str(good), root=str(root))

    # by hand: promote the refused candidate, then roll back to the nightly champion
    assert gur(["--root", str(root), "promote", third["candidate"], "--reason", "test"]) == 0
    assert read_champion(root)["export"] == third["candidate"]
    assert gur(["--root", str(root), "rollback"]) == 0
    assert read_champion(root)["export"] == champion["export"] and read_champion(root)["number"] == 1

    from storage.catalog import refresh_catalog

    refresh_catalog(root)  # the CLI commands above do not touch the catalog
    con = duckdb.connect(str(root / "catalog.duckdb"), read_only=True)
    decisions = con.execute("SELECT decision FROM promotions ORDER BY created_at").fetchall()
    refused = con.execute(
        "SELECT candidate_metrics, gain, gain_low, gain_high, p_value FROM promotions WHERE decision = 'refused'"
    ).fetchone()
    con.close()
    assert [d for (d,) in decisions] == ["promoted", "nothing-new", "refused", "manual", "rollback"]
    assert PRIMARY in json.loads(refused[0]) and refused[2] <= refused[1] <= refused[3] and refused[4] > 0.05


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.slow
@pytest.mark.parametrize("records", ["relative", "absolute"])
def test_a_root_moved_to_another_disk_keeps_its_champion_suite_catalog_search_and_retention(
    nightly, tmp_path, capsys, records
):
    """A root's records name its contents relative to it (the champion's export, the held-out suite, the models
    evaluated and embedded); a copy under another path, with the old place gone, reads them where they are now.
    `absolute`: the records as earlier versions wrote them, every path where the root was (the catalog's views
    always name absolute paths, rewritten on first read). Run after `test_nights` its root holds a champion, a
    refused candidate and a rollback."""
    import shutil

    from flows.nightly_retrain import nightly_retrain
    from gur_cli import main as gur
    from tasks.retention.plan import RetentionConfig, plan
    from tests.helpers.legacy_root import absolute_records

    root, base = nightly["root"], nightly["base"]
    if read_champion(root) is None:  # run alone
        good = write_config(base / "good.toml", nightly["corpus"], nightly["model"], lr=1e-3)
        nightly_retrain(config_path=str(good), root=str(root))
    before = plan(root, RetentionConfig(keep_refused=0))
    moved = tmp_path / "disk2" / "data"
    if records == "absolute":
        old = tmp_path / "disk1" / "data"
        shutil.copytree(root, old, symlinks=True)
        assert absolute_records(old) > 5
        shutil.copytree(old, moved, symlinks=True)
        shutil.rmtree(old)  # nothing may read the old place
    else:
        shutil.copytree(root, moved, symlinks=True)
    away = root.with_name("data-away")
    root.rename(away)  # nothing may read the old place
    try:
        champion = read_champion(moved)
        assert champion["export"].startswith(f"{moved}/") and Path(champion["export"]).is_dir()
        assert all(e["export"].startswith(f"{moved}/") for e in history(moved))
        assert all(export.startswith(f"{moved}/") for export in rolled_back(moved))
        after = plan(moved, RetentionConfig(keep_refused=0))  # the same outputs kept, deleted and pruned
        assert [sorted(p) for p in (after.keep, after.delete, after.prune)] == [
            sorted(p) for p in (before.keep, before.delete, before.prune)
        ]
        capsys.readouterr()
        assert gur(["--root", str(moved), "sql", "SELECT count(*) AS n FROM documents"]) == 0  # views rewritten
        assert (
            str(moved)
            in duckdb.connect(str(moved / "catalog.duckdb"), read_only=True)
            .sql("SELECT min(sql) FROM duckdb_views() WHERE view_name = 'documents'")
            .fetchone()[0]
        )
        assert gur(["--root", str(moved), "search", "python list"]) == 0 and "(10 rows)" in capsys.readouterr().out
        worse = write_config(tmp_path / "worse.toml", nightly["corpus"], nightly["model"], lr=3.0, interpolate=None)
        night = nightly_retrain(config_path=str(worse), root=str(moved))
        assert night["decision"] == "refused" and night["champion"] == champion["export"], night["reason"]
        assert PRIMARY in night["candidate_metrics"] and PRIMARY in night["champion_metrics"]  # the suite was read
        assert night["overlap"] == 0 and night["candidate"].startswith(f"{moved}/")
    finally:
        away.rename(root)


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.slow
def test_a_night_that_fails_after_training_names_its_candidate_so_gc_can_free_it(nightly, tmp_path):
    """The candidate is trained, then a broken extra evaluation set stops the night: the `failed` row names
    the candidate, so retention counts it judged instead of keeping its weights as a run of your own."""
    from flows.nightly_retrain import nightly_retrain
    from tasks.retention.plan import RetentionConfig, plan

    broken = tmp_path / "broken-beir"
    (broken / "qrels").mkdir(parents=True)
    (broken / "corpus.jsonl").write_text('{"_id": "1", "text": "a"}\n{"_id": \n', encoding="utf-8")
    (broken / "queries.jsonl").write_text('{"_id": "q", "text": "a"}\n', encoding="utf-8")
    (broken / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq\t1\t1\n", encoding="utf-8")
    config = write_config(tmp_path / "n.toml", nightly["corpus"], nightly["model"], lr=1e-3, steps=2)
    config.write_text(config.read_text().replace("stsb = []", f'stsb = []\nbeir = ["{broken}"]'))
    root = tmp_path / "data"
    with pytest.raises(ValueError, match="corpus.jsonl:2: not JSON"):
        nightly_retrain(config_path=str(config), root=str(root))
    (row,) = pq.read_table(root / "models" / "promotions").to_pylist()
    assert row["decision"] == "failed" and row["candidate"].endswith("/export") and (root / row["candidate"]).is_dir()
    assert not Path(row["candidate"]).is_absolute()  # the root's records name its contents relative to it
    run = str(Path(row["candidate"]).parent)
    assert "keep_refused" in plan(root, RetentionConfig(keep_refused=1)).keep[run]
    assert plan(root, RetentionConfig(keep_refused=0)).prune[run][0] == "export"


@pytest.mark.soak
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.slow
def test_a_night_on_a_disk_with_less_room_than_a_candidate_needs_runs_retention_first(nightly, tmp_path, monkeypatch):
    """The disk's free space is the one thing made up here (a full disk cannot be had in CI): the night runs its
    retention before it writes anything, and its row says what each gc freed."""
    import flows.nightly_retrain as module
    import tasks.nightly.upkeep as upkeep

    root = tmp_path / "data"
    config = write_config(tmp_path / "n.toml", nightly["corpus"], nightly["model"], lr=1e-3, steps=2)
    first = module.nightly_retrain(config_path=str(config), root=str(root))
    assert first["decision"] == "refused" and not first["gc"].startswith("at the start")  # room enough
    config.write_text(config.read_text() + "\n[retention]\nkeep_refused = 0\n")
    monkeypatch.setattr(upkeep, "free_bytes", lambda path: 0)  # where the night's make_room reads it
    second = module.nightly_retrain(config_path=str(config), root=str(root))
    # keep_refused = 0: the first night's candidate loses its weights before the second night trains
    start, end = second["gc"].split("; at the end: ")
    assert start.startswith("at the start: deleted 0 outputs, pruned 1 runs") and second["gc_freed_bytes"] > 0


def test_decision_rows_are_a_catalog_view(tmp_path):
    from storage.catalog import refresh_catalog

    record_decision(
        tmp_path, {"decision": "promoted", "reason": "r", "candidate": "/c", "candidate_metrics": {"m": 1.0}}
    )
    refresh_catalog(tmp_path)
    con = duckdb.connect(str(tmp_path / "catalog.duckdb"), read_only=True)
    row = con.execute("SELECT decision, candidate, candidate_metrics FROM promotions").fetchone()
    con.close()
    assert row == ("promoted", "/c", '{"m": 1.0}')


@pytest.mark.soak
@pytest.mark.slow
def test_a_night_killed_during_training_resumes_and_never_half_writes_the_champion(nightly, tmp_path, prefect_api_url):
    """`gur nightly` (and its trainer) SIGKILLed once a checkpoint exists; the next night continues from it. On the
    tests' Prefect server (gur killed with a server of its own: tests/cli/test_cli_crash_resume.py)."""
    import os
    import signal
    import subprocess

    from samples.tiny_bert import REPO

    root = tmp_path / "data"
    # About the length that promotes in test_nights: the kill lands within 0.05 s of the step-5 checkpoint, and the
    # rerun trains the rest, not the whole run again. A budget of 9.5 minutes cuts the 100 steps to what fits after
    # the data stages at the default 4.7 s a step (about 95): the rerun, its data stages cached, would fit more, and
    # keeps the stopped night's count (tasks/nightly/kept_plan.py), so its run is the one the checkpoints are of.
    config = write_config(tmp_path / "n.toml", nightly["corpus"], nightly["model"], lr=1e-3)
    config.write_text(config.read_text().replace("ckpt_every = 100", "ckpt_every = 5") + "\n[budget]\nminutes = 9.5\n")
    cmd = [sys.executable, "-m", "gur_cli", "--root", str(root), "nightly", "--config", str(config)]
    env = {**gur_env(api=prefect_api_url), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 240
        while not list(root.glob("train/*/checkpoints/step-*.pt")) and time.monotonic() < deadline:
            assert proc.poll() is None, "gur nightly ended before its first checkpoint"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the process group: gur and the trainer
        proc.wait()
    saved = sorted(root.glob("train/*/checkpoints/step-*.pt"))
    assert saved and not (root / "models" / "champion.json").exists()
    again = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    output = again.stdout + again.stderr
    assert again.returncode == 0, output[-3000:]
    assert f"resumed from {saved[-1].name}" in output or "resumed from step-" in output, output[-3000:]
    assert "on these inputs, run again: its" in output and "steps kept" in output, output[-3000:]
    assert len(list(root.glob("train/*/_manifest.json"))) == 1  # the same run folder, finished
    assert read_champion(root)["number"] == 1
    assert not list((root / "models").rglob(".*"))  # atomic writes leave no temporaries


def test_promotions_rows_of_an_older_schema_still_read(tmp_path):
    """A row written before the gate's columns existed reads NULL there; new rows carry them."""
    import pyarrow as pa

    from storage.catalog import refresh_catalog

    folder = tmp_path / "models" / "promotions"
    folder.mkdir(parents=True)
    old = pa.table({"decision": ["promoted"], "reason": ["r"], "candidate": ["/old"], "champion_metrics": ["{}"]})
    pq.write_table(old, folder / "part-1.parquet")
    record_decision(tmp_path, {"decision": "refused", "candidate": "/new", "gain": 0.01, "p_value": 0.3})
    refresh_catalog(tmp_path)
    with duckdb.connect(str(tmp_path / "catalog.duckdb"), read_only=True) as con:
        rows = con.execute("SELECT candidate, gain, p_value FROM promotions ORDER BY candidate").fetchall()
    assert rows == [("/new", 0.01, 0.3), ("/old", None, None)]
