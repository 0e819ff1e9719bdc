"""The night's plan against its budget (tasks/nightly/budget.py): the steps that fit, the rates a root has
measured, and how a capped plan reads."""

from __future__ import annotations

import json
import time

import pytest

from tasks.nightly.budget import MIN_STEPS, RESERVE, Rates, Work, full_steps, measured_rates, plan_night

RATES = Rates(train_step_s=10.0, train_start_s=0.0, suite_doc_s=0.1, guard_s=30.0, embed_doc_s=0.02)


def test_the_full_epoch_when_it_fits_and_the_steps_that_fit_when_it_does_not():
    work = Work(steps=100, suite_docs=600, corpus_docs=3000)
    roomy = plan_night(3 * 3600, 60, work, RATES)
    assert roomy.steps == 100 and not roomy.capped and roomy.fits
    assert roomy.gate_s == 2 * (600 * 0.1 + 30) and roomy.embed_s == 3000 * 0.02
    assert roomy.decision_s == 60 + 100 * 10 + roomy.gate_s

    tight = plan_night(900, 60, work, RATES)  # 840 s left: 756 after the reserve, 576 after the gate
    assert tight.steps == int(((900 - 60) * (1 - RESERVE) - tight.gate_s) // 10) == 57
    assert tight.capped and tight.fits and tight.decision_s <= 900
    lines = "\n".join(tight.lines())
    assert "training 57 of 100 steps" in lines and "does not fit" in lines and "within the budget" in lines

    hopeless = plan_night(120, 60, work, RATES)
    assert hopeless.steps == MIN_STEPS and not hopeless.fits
    assert "OVER the budget" in "\n".join(hopeless.lines())
    record = json.loads(tight.record())
    assert record["steps"] == 57 and record["full_steps"] == 100 and record["rates"]["train_step_s"] == 10.0


def test_a_run_length_is_its_epochs_of_pairs_with_gurs_batches_on_top():
    assert full_steps(2420, 32, 1.0) == 76
    assert full_steps(2420, 32, 1.0, gur_share=0.2) == 95  # what the documents recipe logs: 1 epoch = 94-95 steps
    assert full_steps(16000, 32, 10.0) == 5000
    assert full_steps(0, 32, 1.0) == 1


def write_manifest(folder, name, **fields):
    path = folder / name
    path.mkdir(parents=True)
    (path / "_manifest.json").write_text(json.dumps({"fingerprint": name, **fields}), encoding="utf-8")


def test_rates_come_from_the_roots_newest_outputs_else_the_defaults(tmp_path):
    defaults = measured_rates(tmp_path, "documents")
    assert defaults == Rates() and defaults.source("train_step_s").startswith("default")
    now = time.time()
    train, units, embed = tmp_path / "train", tmp_path / "eval-unit", tmp_path / "embed"
    documents = {"method": "documents"}
    write_manifest(train, "old", config=documents, rows={"steps": 10}, started_at=now - 500, finished_at=now - 400)
    write_manifest(train, "new", config=documents, rows={"steps": 50}, started_at=now - 300, finished_at=now - 50)
    write_manifest(train, "tfcsg", config={"method": "tfcsg"}, rows={"steps": 5}, started_at=now - 9, finished_at=now)
    write_manifest(
        units, "title", status="ok", detail="556 queries, 600 documents", started_at=now - 30, finished_at=now
    )
    write_manifest(
        units, "ict", status="ok", detail="580 queries, 600 documents", started_at=now - 46, finished_at=now - 1
    )
    write_manifest(
        units, "older", status="ok", detail="9 queries, 600 documents", started_at=now - 999, finished_at=now - 9
    )
    write_manifest(units, "sts", status="ok", detail="", started_at=now - 40, finished_at=now)
    write_manifest(embed, "e", embedded_now=3000, started_at=now - 60, finished_at=now - 5)
    write_manifest(embed, "few", embedded_now=700, started_at=now - 70, finished_at=now)  # mostly its start
    rates = measured_rates(tmp_path, "documents")
    assert rates.train_step_s == pytest.approx(250 / 50)  # the newest documents run, not the TFCSG one
    assert rates.suite_doc_s == pytest.approx(30 / 600 + 45 / 600)  # the newest title and ICT units, one model
    assert rates.guard_s == pytest.approx(40) and rates.embed_doc_s == pytest.approx(55 / 3000)
    assert rates.source("train_step_s") == "this root: train/new" and rates.train_start_s == 0
    # a run whose manifest says how long its step loop took (its summary's): the rest of its time is a start cost
    manifest = json.loads((train / "new" / "_manifest.json").read_text())
    manifest["summary"] = {"trained_s": 200.0}
    (train / "new" / "_manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    split = measured_rates(tmp_path, "documents")
    assert split.train_step_s == pytest.approx(200 / 50) and split.train_start_s == pytest.approx(50)
    # the documents recipe's clustering embeds the documents the steps show: a share of each step, not of the start
    manifest["summary"] = {"trained_s": 200.0, "clusters_s": 20.0}
    (train / "new" / "_manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    clustered = measured_rates(tmp_path, "documents")
    assert clustered.train_step_s == pytest.approx(220 / 50) and clustered.train_start_s == pytest.approx(30)
    manifest["summary"] = {"trained_s": 200.0}
    (train / "new" / "_manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    # a trained model's units (their overlap check reads its training input) set the rate, though the start's are newer
    trained = {"overlap": {"overlap": 0, "training_input": "split/abc"}}
    for name, took in (("cand-title", 40), ("cand-ict", 60)):
        start, end = now - 200 - took, now - 200
        detail = "9 queries, 600 documents"
        write_manifest(units, name, status="ok", detail=detail, started_at=start, finished_at=end, **trained)
    write_manifest(units, "cand-sts", status="ok", detail="", started_at=now - 300, finished_at=now - 250, **trained)
    of_trained = measured_rates(tmp_path, "documents")
    assert of_trained.suite_doc_s == pytest.approx(40 / 600 + 60 / 600) and of_trained.guard_s == pytest.approx(50)
    work = Work(steps=100, suite_docs=0, corpus_docs=0, guard=False)
    plan = plan_night((50 + 350) / (1 - RESERVE), 0, work, split)  # 400 s: the start, then 87 steps of 4 s
    assert plan.steps == 87 and plan.train_s == pytest.approx(50 + 87 * 4) and "+ 50 s to start" in plan.lines()[1]


def test_the_gate_counts_only_what_the_model_in_use_has_not_scored():
    work = Work(steps=100, suite_docs=600, corpus_docs=0, reused_guard=1.0)  # a later night: its guard on disk
    later = plan_night(3 * 3600, 60, work, RATES)
    assert later.gate_s == 2 * 600 * 0.1 + 30  # the candidate's guard only
    assert "the model in use's guard on disk, reused" in "\n".join(later.lines())
    both = Work(steps=100, suite_docs=600, corpus_docs=0, reused_suite=1.0, reused_guard=1.0)
    assert plan_night(3 * 3600, 60, both, RATES).gate_s == 600 * 0.1 + 30  # the candidate alone
    half = Work(steps=100, suite_docs=600, corpus_docs=0, guard=False, reused_suite=0.5, reused_guard=1.0)
    plan = plan_night(3 * 3600, 60, half, RATES)
    assert plan.gate_s == 1.5 * 600 * 0.1  # no guard configured: a guard unit on disk counts for nothing
    assert plan.reused == "; the model in use's suite (50% of its units) on disk, reused"
    assert json.loads(plan.record())["reused"] == plan.reused
    assert plan_night(3 * 3600, 60, Work(steps=1, suite_docs=1, corpus_docs=0), RATES).reused == ""


@pytest.mark.usefixtures("prefect_harness")
def test_units_on_disk_are_the_ones_the_gates_evaluation_reuses(tmp_path):
    """The plan's check against the real evaluate flow: a model's units are on disk after it scored the gate's
    suite and guard; a changed suite file is new, the guard's units are not."""
    from flows.evaluate import evaluate
    from flows.nightly_retrain import gate_units
    from tasks.nightly.config import load_nightly_config
    from tasks.nightly.gate import gate_evaluation
    from tasks.nightly.gate_suite import gate_suite
    from tasks.nightly.plan import units_on_disk
    from tests.helpers.nightly_config import night_of
    from tests.helpers.shared_data import require_shared
    from tests.helpers.sts_fixtures import STSB, stsb_rows, write_csv

    titles = STSB.parent / "stackoverflow" / "train.tsv"
    require_shared(titles, STSB / "stsb-en-dev.csv")
    suite_file = tmp_path / "suite.tsv"
    suite_file.write_text("".join(titles.read_text(encoding="utf-8").splitlines(True)[:201]), encoding="utf-8")
    guard_file = write_csv(tmp_path / "stsb-en-train.csv", stsb_rows("en", "dev", 100))  # the default guard's name
    (tmp_path / "corpus").mkdir()
    config = tmp_path / "nightly.toml"
    config.write_text(
        f'[corpus]\npath = "{tmp_path / "corpus"}"\n\n[evaluate]\nstackoverflow = "{suite_file}"\n'
        f'stsb = ["{guard_file}"]\n',
        encoding="utf-8",
    )
    base = tmp_path / "data"
    cfg = load_nightly_config(config)
    corpus, suite = gate_suite(cfg, base)
    assert corpus == cfg.corpus  # a named suite: the corpus as configured trains
    night = night_of(cfg, base, suite, corpus=corpus)

    def on_disk(model: str) -> tuple[float, float]:
        return units_on_disk(base, gate_units(night, model))

    assert on_disk("glove") == (0.0, 0.0)
    result = evaluate(**gate_evaluation(night, ["glove"]))
    assert len(result["units"]) == 2
    assert on_disk("glove") == (1.0, 1.0)
    assert on_disk("bm25") == (0.0, 0.0)  # another model: nothing of its own on disk
    suite_file.write_text("".join(titles.read_text(encoding="utf-8").splitlines(True)[:191]), encoding="utf-8")
    assert on_disk("glove") == (0.0, 1.0)  # a changed suite: scored again, the guard not


def test_a_kept_plan_keeps_its_steps_whatever_time_is_left_and_counts_only_the_steps_not_done():
    work = Work(steps=100, suite_docs=600, corpus_docs=3000)
    stopped = plan_night(900, 60, work, RATES)  # the night stopped in its training: 57 steps planned
    kept = {"steps": stopped.steps, "planned_at": 1.8e9, "steps_done": 40}
    again = plan_night(900, 5, work, RATES, kept)  # run again: its data stages cached, 55 s more left
    assert plan_night(900, 5, work, RATES).steps == 62  # what a new plan would fit: another run
    assert again.steps == 57 and again.capped and again.train_s == (57 - 40) * 10
    assert again.kept == {"planned_at": 1.8e9, "steps_done": 40}
    assert "planned at 2027-01-15 08:00 UTC on these inputs, run again: its 57 steps kept" in "\n".join(again.lines())
    assert json.loads(again.record())["kept"]["steps_done"] == 40
    started = Rates(train_step_s=10.0, train_start_s=60.0)
    assert plan_night(900, 5, work, started, {**kept, "steps_done": 57}).train_s == 0  # finished: reused whole
    assert plan_night(900, 5, work, started, {**kept, "steps_done": 0}).train_s == 60 + 570


def test_the_kept_plan_is_the_one_of_tonights_key_and_a_run_since_it_tells_the_steps_done(tmp_path):
    from tasks.nightly.kept_plan import keep_plan, kept_plan, night_key, plan_path, steps_done

    inputs = {"split": {"stage": "split", "fingerprint": "a" * 16, "path": "split/" + "a" * 16}}
    key = night_key("documents", inputs, "models/start", "settings", 180)
    moved = {"split": {**inputs["split"], "path": "/moved"}}
    assert key == night_key("documents", moved, "models/start", "settings", 180)
    changed = {"split": {**inputs["split"], "fingerprint": "b" * 16}}
    others = [
        night_key("documents", changed, "models/start", "settings", 180),
        night_key("documents", inputs, "train/champion/export", "settings", 180),
        night_key("documents", inputs, "models/start", "other settings", 180),
        night_key("documents", inputs, "models/start", "settings", 30),
    ]
    assert key not in others and len(set(others)) == 4
    assert kept_plan(tmp_path, key) is None
    plan = plan_night(900, 60, Work(steps=100, suite_docs=600, corpus_docs=3000), RATES)
    keep_plan(tmp_path, key, plan, 1.0, planned_at=100.0)
    assert kept_plan(tmp_path, key) == {
        "key": key,
        "planned_at": 100.0,
        "steps": 57,
        "full_steps": 100,
        "replay": {},
        "ratio": 1.0,
    }
    assert kept_plan(tmp_path, others[0]) is None  # another night's inputs: a new plan, which replaces it
    plan_path(tmp_path).write_text("{", encoding="utf-8")
    assert kept_plan(tmp_path, key) is None  # unreadable: planned afresh, never a failed night

    since = time.time()
    run = tmp_path / "train" / "f00d"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"max_steps": 57, "init_from": "/start"}), encoding="utf-8")
    for step in (20, 50, 40):
        (run / "checkpoints" / f"step-{step:08d}.pt").write_bytes(b"")
    assert steps_done(tmp_path, since, 57, "/start") == 50
    assert steps_done(tmp_path, since, 57, "/other start") == 0
    assert steps_done(tmp_path, since, 58, "/start") == 0
    assert steps_done(tmp_path, since + 60, 57, "/start") == 0  # written before the plan: not tonight's run
    (run / "_manifest.json").write_text("{}", encoding="utf-8")
    assert steps_done(tmp_path, since, 57, "/start") == 57  # finished: reused whole
