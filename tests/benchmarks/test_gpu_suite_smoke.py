"""`benchmarks/gpu_suite --smoke`: the GPU window's one command, end to end on the CPU on tiny sizes.

Every part must have run (its checks all passed) or been skipped with a reason, every row likewise, every
figure be a finite number or null (MFU without a known peak), and the command exit 0. About two minutes on
two cores; the suite writes its entry to the test's own folder, never to docs/results/.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from storage.shared_data import shared_data
from tests.helpers import REPO
from tests.helpers.shared_data import require_shared

PARTS = ["tests", "throughput", "tfcsg", "sbert", "gur-scratch"]

pytestmark = pytest.mark.slow  # a subprocess that trains five small things


@pytest.mark.soak
def test_gpu_suite_smoke_runs_every_part(tmp_path):
    require_shared(shared_data("stackoverflow", "train.tsv"), shared_data("stsb", "stsb-en-train.csv"))
    cmd = [sys.executable, str(REPO / "benchmarks" / "gpu_suite"), "--smoke", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    [result] = tmp_path.glob("????-??-??-gpu-suite-smoke-??????Z.json")  # the results log's entry and its figures
    assert result.with_suffix(".md").read_text().startswith(f"# {result.name[:10]} · GPU suite, smoke run at ")
    record = json.loads(result.read_text())
    assert record["mode"] == "smoke" and record["passed"]
    assert [p["name"] for p in record["parts"]] == PARTS
    for part in record["parts"]:
        name = part["name"]
        assert part["status"] in ("ran", "skipped"), (name, part["reason"])
        if part["status"] == "skipped":
            assert part["reason"], name
            continue
        assert part["checks"] and all(c["passed"] for c in part["checks"]), (name, part["checks"])
        for row in part["rows"]:
            assert row["status"] in ("ran", "skipped"), (name, row)
            assert row["status"] == "ran" or row["reason"], (name, row["label"])
            assert row["status"] == "skipped" or row["command"], (name, row["label"])
            for key, value in row["figures"].items():
                ok = value is None or (isinstance(value, int | float) and math.isfinite(value))
                assert ok, (name, row["label"], key, value)


def test_stage_fn_returns_the_reference_when_the_output_is_reused(tmp_path):
    """A second suite run on the same work folder reuses the built data: the stage function then returns a
    `Cached` state, which the suite's next stage cannot read (the first GPU window's tfcsg rerun failed so)."""
    saved = dict(os.environ)  # the suite sets Prefect and Hugging Face variables as it loads: not for later tests
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from gpu_suite.harness import stage_fn
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
        os.environ.clear()
        os.environ.update(saved)

    from tasks.ingest.documents import IngestConfig
    from tasks.ingest.readers import ReaderConfig
    from tasks.ingest.task import ingest

    corpus = tmp_path / "titles.jsonl"
    corpus.write_text('{"text": "How do I sort a list in Python?"}\n{"text": "Why is my loop slow?"}\n')
    config = IngestConfig(ReaderConfig(text_field="text", title_field=""))
    first = stage_fn(ingest, str(corpus), config, str(tmp_path / "root"), workers=1)
    again = stage_fn(ingest, str(corpus), config, str(tmp_path / "root"), workers=1)
    assert isinstance(first, dict) and first["stage"] == "ingest"
    assert again == first  # the reference, not a state


@pytest.mark.soak
def test_tfcsg_from_the_base_model_alone_scores_it(tmp_path):
    """`--tfcsg-starts mpnet` (the all-mpnet-base-v2 window's call): no MiniLM row, and the base model (the tiny
    random BERT in its place under --smoke) gets the whole part, its dev P@1 row, and a rerun command that
    keeps the option."""
    require_shared(shared_data("stackoverflow", "train.tsv"))
    cmd = [sys.executable, str(REPO / "benchmarks" / "gpu_suite"), "--smoke", "--out", str(tmp_path)]
    cmd += ["--parts", "tfcsg", "--tfcsg-starts", "mpnet"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    [result] = tmp_path.glob("????-??-??-gpu-suite-smoke-??????Z.json")
    [part] = json.loads(result.read_text())["parts"]
    assert part["status"] == "ran", part["reason"]
    labels = [row["label"] for row in part["rows"] if row["status"] == "ran"]
    assert labels and not any("MiniLM" in label for label in labels), labels
    assert any(label.endswith("dev P@1 after one epoch") for label in labels), labels
    assert all("--tfcsg-starts mpnet" in row["command"] for row in part["rows"])
