"""The `train` flow and task: storage contract, cache hit on rerun, resume of an interrupted run."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from samples.train_shards import write_demo_shards  # noqa: E402
from storage.manifest import read_manifest  # noqa: E402
from tasks.train.task import train_config, train_fingerprint  # noqa: E402
from tests.helpers.flow_runs import task_states  # noqa: E402
from tests.helpers.train_shards import OPTIONS

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.slow]


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("gur-home")
    write_demo_shards(base / "shuffle" / "demo", max_docs=30, max_pairs_per_doc=20, row_group_rows=64)
    return base


def test_train_flow_writes_the_stage_and_reruns_as_a_cache_hit(root):
    from flows.train import train_flow

    ref = train_flow(root=str(root), preset="tiny", steps=6, lr=1e-3, options=OPTIONS)
    out = root / ref["path"]
    manifest = read_manifest(out)
    assert ref["stage"] == "train" and manifest["rows"]["steps"] == 6
    assert manifest["upstream"] == [{"stage": "shuffle", "fingerprint": "demo", "path": "shuffle/demo"}]
    assert manifest["labels"] == {"method": "gur", "variant": "lcs"}
    for name in ("checkpoints/step-00000006.pt", "export/modules.json", "metrics.parquet", "loss_curve.png"):
        assert (out / name).exists(), name
    stamp = (out / "summary.json").stat().st_mtime_ns
    again = train_flow(root=str(root), preset="tiny", steps=6, lr=1e-3, options=OPTIONS, return_state=True)
    assert again.result() == ref and (out / "summary.json").stat().st_mtime_ns == stamp  # nothing retrained
    assert task_states(again)["train"] == "Cached"


def test_interrupted_run_resumes_from_its_checkpoint(root):
    from flows.train import train_flow
    from models.training.loop import train as train_loop

    shards = {"stage": "shuffle", "fingerprint": "demo", "path": "shuffle/demo"}
    config = {
        "objective": "cl",
        "preset": "tiny",
        "max_steps": 5,
        "pooling": "mean",
        "init_from": "",
        "lr": 1e-3,
        **OPTIONS,
    }
    out = root / "train" / train_fingerprint(shards, config)
    cfg = train_config(config, out_dir=str(out), shards=str(root / "shuffle" / "demo"))
    assert train_loop(dataclasses.replace(cfg, stop_at_step=4)) == {"stopped_at": 4}  # killed after step 4
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-00000003.pt"]
    ref = train_flow(
        shards=shards, root=str(root), objective="cl", preset="tiny", steps=5, pooling="mean", lr=1e-3, options=OPTIONS
    )
    assert root / ref["path"] == out
    assert read_manifest(out)["rows"]["steps"] == 5
    assert not (out / "samples.jsonl").exists()  # objective `cl` trains no decoder: no infill samples
