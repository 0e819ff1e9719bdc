"""The artifacts of `build-pairs` and `train`: pure builders on hand-made values, then real flow runs; and every
flow's publisher when Prefect refuses the artifact: a warning, never a failed run."""

from __future__ import annotations

import json
import logging
import os

import prefect.artifacts
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage.layout import shard_name
from storage.stage_output import ref_dir, stage_ref
from tasks.evaluate.report import METRICS_SCHEMA
from tasks.evaluate.task import publish_evaluation  # before any test: Prefect's logging set-up drops caplog's handler
from tasks.keywords.task import publish_artifacts as publish_keywords
from tasks.nightly.report import publish as publish_decision
from tasks.runtime.artifacts import heldout_table, stage_status
from tasks.sts.task import publish_sts
from tests.helpers.flow_runs import DOCS, flow_artifacts

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def test_stage_status_compares_the_finish_time_with_the_run_start():
    assert stage_status({"finished_at": 100.0}, since=99.0) == "built"
    assert stage_status({"finished_at": 100.0}, since=100.5) == "cached"


def test_heldout_table_lists_every_evaluation_with_chance():
    lines = heldout_table({"heldout_acc": [[0, 0.25], [3, 0.5]], "chance": 0.25})
    assert lines[0] == "Held-out in-batch retrieval accuracy (chance 0.25):"
    assert lines[-2:] == ["| 0 | 0.25 |", "| 3 | 0.5 |"]
    assert heldout_table({}) == ["No held-out evaluation was run."]


@pytest.mark.usefixtures("prefect_harness")
def test_build_pairs_publishes_a_stage_table_and_the_output_folders(tmp_path):
    from flows.build_pairs import build_pairs

    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS), encoding="utf-8")
    root = tmp_path / "data"
    state = build_pairs(input_path=str(corpus), root=str(root), workers=1, return_state=True)
    refs = state.result()
    artifacts = flow_artifacts(state)
    assert set(artifacts) == {"build-pairs-stages", "build-pairs-outputs"}
    rows = artifacts["build-pairs-stages"]
    assert [r["stage"] for r in rows] == ["ingest", "split", "pair", "shuffle"]
    assert [r["status"] for r in rows] == ["built"] * 4
    assert rows[0]["rows"] == "documents=2, rejects=1" and rows[0]["drops"] == "empty_text=1"
    assert [r["folder"] for r in rows] == [str(root / ref["path"]) for ref in refs.values()]
    assert all(isinstance(r["seconds"], float) and r["fingerprint"] for r in rows)
    outputs = artifacts["build-pairs-outputs"]
    for ref in refs.values():
        assert f"`{root / ref['path']}`" in outputs
    assert f"sentences: `{root / refs['sentences']['path'] / 'part-*.parquet'}`" in outputs

    again = build_pairs(input_path=str(corpus), root=str(root), workers=1, return_state=True)
    assert [r["status"] for r in flow_artifacts(again)["build-pairs-stages"]] == ["cached"] * 4


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_train_publishes_the_loss_curve_and_the_heldout_accuracy(tmp_path):
    from flows.train import train_flow
    from samples.train_shards import write_demo_shards
    from tests.helpers.train_shards import OPTIONS

    root = tmp_path / "home"
    write_demo_shards(root / "shuffle" / "demo", max_docs=30, max_pairs_per_doc=20, row_group_rows=64)
    state = train_flow(root=str(root), preset="tiny", steps=6, lr=1e-3, options=OPTIONS, return_state=True)
    ref = state.result()
    artifacts = flow_artifacts(state)
    assert set(artifacts) == {"train-report", "train-summary"}
    report = artifacts["train-report"]
    assert "![loss curve](data:image/png;base64,iVBOR" in report  # the PNG, inline
    summary = json.loads((root / ref["path"] / "summary.json").read_text())
    assert len(summary["heldout_acc"]) == 3  # steps 0, 3 and 6 (eval_every=3)
    for step, acc in summary["heldout_acc"]:
        assert f"| {step} | {acc:.4g} |" in report
    fields = {r["field"]: r["value"] for r in artifacts["train-summary"]}
    assert fields["status"] == "built" and fields["steps"] == "6" and fields["method"] == "gur"
    assert fields["fingerprint"] == ref["fingerprint"] and fields["export"] == str(root / ref["path"] / "export")
    assert fields["heldout_acc (last)"] == f"{summary['heldout_acc'][-1][1]:.4g}"


def evaluation_report(root) -> str:
    """`publish_evaluation`'s own code on a hand-made metrics output (an empty table and a report)."""
    metrics = stage_ref("evaluate-report", "0" * 16)
    out = ref_dir(root, metrics)
    out.mkdir(parents=True)
    pq.write_table(METRICS_SCHEMA.empty_table(), out / shard_name(0))
    (out / "report.md").write_text("# Evaluation\n", encoding="utf-8")
    return publish_evaluation.fn(metrics, str(root))


def sts_report(root) -> str:
    report = stage_ref("sts-report", "0" * 16)
    ref_dir(root, report).mkdir(parents=True)
    (ref_dir(root, report) / "report.md").write_text("# STS\n", encoding="utf-8")
    return publish_sts.fn(report, str(root))


def keywords_tables(root) -> None:
    return publish_keywords(pa.table({"topic": [0], "keywords": [["sort", "dict"]]}), [], "**keywords** 1 row")


def nightly_decision(root) -> None:
    return publish_decision("# nightly decision\n")


@pytest.mark.parametrize(
    ("publish", "what", "returns"),
    [
        (evaluation_report, "evaluation", "evaluate-report/0000000000000000/report.md"),
        (sts_report, "sts", "sts-report/0000000000000000/report.md"),
        (keywords_tables, "mine-keywords", None),
        (nightly_decision, "nightly-decision", None),
    ],
    ids=["evaluate", "sts", "mine-keywords", "nightly"],
)
def test_an_artifact_that_fails_to_publish_is_a_warning_not_a_failed_run(
    tmp_path, monkeypatch, caplog, publish, what, returns
):
    def refuse(*args, **kwargs):
        raise RuntimeError("the API refused the artifact")

    for name in ("create_markdown_artifact", "create_table_artifact"):
        monkeypatch.setattr(prefect.artifacts, name, refuse)
    with caplog.at_level(logging.WARNING):
        result = publish(tmp_path)
    assert result == (str(tmp_path / returns) if returns else None)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"no {what} artifacts: RuntimeError: the API refused the artifact"]
