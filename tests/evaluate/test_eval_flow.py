"""The `evaluate` flow end to end: units, the `metrics` view, report, charts, not-run rows, cache hits."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.shared_data import shared_data
from tests.helpers.flow_runs import task_run_states
from tests.helpers.shared_data import require_shared

pytestmark = pytest.mark.usefixtures("prefect_harness")

SHARED = shared_data()


def test_evaluate_flow(tmp_path):
    require_shared(SHARED / "stackoverflow" / "train.tsv", SHARED / "stsb" / "stsb-en-dev.csv")
    from flows.evaluate import evaluate
    from storage.catalog import connect_catalog
    from storage.manifest import read_manifest
    from storage.stage_output import ref_dir

    params = dict(
        models=["bm25", "glove"],
        stackoverflow=str(SHARED / "stackoverflow" / "train.tsv"),
        stsb=[str(SHARED / "stsb" / "stsb-en-dev.csv"), str(tmp_path / "no-such-stsb.csv")],
        lee=True,
        demo_retrieval=True,
        limit=300,
        demo_max_articles=4,
        root=str(tmp_path / "data"),
    )
    first_state = evaluate(**params, return_state=True)
    result = first_state.result()
    root = tmp_path / "data"
    # bm25: stackoverflow + demo (no STS for a ranker); glove: all five datasets
    assert len(result["units"]) == 2 + 5
    out = ref_dir(root, result["metrics"])
    manifest = read_manifest(out)
    assert manifest["tables"] == {"metrics": "part-*.parquet"}
    assert manifest["not_run"] == ["glove on no-such-stsb"]
    assert (out / "report.md").exists() and Path(result["report"]) == out / "report.md"
    assert {p.name for p in (out / "charts").iterdir()} == {
        "question_retrieval.png",
        "zero_shot.png",
        "sts.png",
        "retrieval.png",
    }

    con = connect_catalog(root)
    try:
        not_run = con.execute(
            "SELECT dataset, metric, value FROM metrics WHERE status = 'not_run' ORDER BY metric"
        ).fetchall()
        columns = [d[0] for d in con.execute("SELECT * FROM metrics LIMIT 0").description]
        p_at_1 = dict(
            con.execute(
                "SELECT model, value FROM metrics WHERE task = 'question_retrieval' AND metric = 'precision' AND k = 1"
            ).fetchall()
        )
        fingerprints = con.execute("SELECT count(DISTINCT run_fingerprint) FROM metrics").fetchone()[0]
    finally:
        con.close()
    assert not_run == [("no-such-stsb", "pearson", None), ("no-such-stsb", "spearman", None)]
    assert columns[:9] == [
        "model",
        "variant",
        "dataset",
        "task",
        "metric",
        "k",
        "value",
        "run_fingerprint",
        "created_at",
    ]
    assert set(p_at_1) == {"bm25", "glove"} and all(0 < v <= 1 for v in p_at_1.values())
    assert fingerprints == len(result["units"])
    assert "not run" in (out / "report.md").read_text()

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    # this run's artifacts only: other tests in the session publish the same keys
    by_run = ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[first_state.state_details.flow_run_id]))
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=by_run)
    artifacts = {a.key: a for a in found if a.key and a.key.startswith("evaluation-")}
    assert set(artifacts) == {"evaluation-metrics", "evaluation-report"}
    assert "bm25" in artifacts["evaluation-report"].data and "glove" in str(artifacts["evaluation-metrics"].data)

    again_state = evaluate(**params, return_state=True)
    again = again_state.result()
    assert again["metrics"] == result["metrics"] and again["units"] == result["units"]
    # Equal references would also come out of a full recompute: the states show that nothing was evaluated again.
    stages = [run for run in task_run_states(again_state) if run[0] in ("evaluate-unit", "evaluate-report")]
    assert stages == [("evaluate-report", "Cached")] + [("evaluate-unit", "Cached")] * len(result["units"])


def test_bad_model_or_no_dataset_is_a_clear_error(tmp_path, capsys):
    from flows.evaluate import evaluate
    from gur_cli import main

    root = str(tmp_path / "data")
    with pytest.raises(ValueError, match="unknown model '/no/such/model'"):
        evaluate(models=["/no/such/model"], stackoverflow="", stsb=[], lee=True, demo_retrieval=False, root=root)
    code = main(["--root", root, "evaluate", "minilm", "--stackoverflow", "", "--stsb", "--no-lee", "--no-demo"])
    assert code == 1 and "no evaluation set selected" in capsys.readouterr().err
    assert not (tmp_path / "data" / "eval-unit").exists()  # nothing ran
