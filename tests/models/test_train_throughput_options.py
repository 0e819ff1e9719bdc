"""The throughput options in the training loop: exact resume with them on, fingerprints unchanged with them off."""

from __future__ import annotations

import dataclasses
import os
import shutil

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from models.training.loop import train  # noqa: E402
from samples.train_shards import write_demo_shards  # noqa: E402
from tasks.train.task import train_fingerprint  # noqa: E402
from tests.helpers.train_shards import run_config  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny matrices: one intra-op thread (conftest)

COMPARED = ("step", "lr", "loss", "lm_loss", "cl_loss", "train_acc", "heldout_acc", "heldout_cl")
OPTIONS = dict(attention="sdpa", packing=True, fused_lm_head=True)
SOURCE = {"stage": "shuffle", "fingerprint": "0123abcd", "path": "shuffle/x"}


def test_default_configs_keep_their_fingerprints():
    # Computed by the code before these options existed: a run made then keeps its folder and checkpoints.
    assert train_fingerprint(SOURCE, {}) == "1f4f7562697972fc"
    assert train_fingerprint(SOURCE, {"preset": "small", "objective": "cl", "max_steps": 50}) == "b5a1775d56bdbe15"
    assert train_fingerprint(SOURCE, {"attention": "eager", "packing": False, "pack_len": 0}) == "1f4f7562697972fc"
    changed = {train_fingerprint(SOURCE, {k: v}) for k, v in {**OPTIONS, "pack_len": 256}.items()}
    assert len(changed) == 4 and "1f4f7562697972fc" not in changed


def test_interrupted_run_with_the_options_resumes_with_the_same_losses(tmp_path):
    shards = tmp_path / "shards"
    write_demo_shards(shards, max_docs=30, max_pairs_per_doc=20, row_group_rows=64)
    base = run_config(shards, tmp_path / "full", max_steps=6, eval_every=3, ckpt_every=3, export=False, **OPTIONS)
    assert train(base)["complete"]
    shutil.copytree(tmp_path / "full" / "tokenizer", tmp_path / "cut" / "tokenizer")  # see test_train_loop
    cut = dataclasses.replace(base, out_dir=str(tmp_path / "cut"), stop_at_step=5)  # checkpoint at 3, 4-5 lost
    assert train(cut) == {"stopped_at": 5}
    assert train(dataclasses.replace(cut, stop_at_step=0))["complete"]

    def curve(run: str) -> list[dict]:
        ckpt = torch.load(tmp_path / run / "checkpoints" / "step-00000006.pt", weights_only=False)
        assert ckpt["config"]["packing"] and ckpt["model_config"]["attention"] == "sdpa"
        return [{k: r.get(k) for k in COMPARED} for r in ckpt["metrics"]]

    assert [r["step"] for r in curve("cut")] == [0, 1, 2, 3, 4, 5, 6]
    assert curve("cut") == curve("full")  # exact on CPU: dropout, masks and packing replay from the checkpoint
    assert all(r["loss"] > 0 and r["lm_loss"] > 0 for r in curve("cut")[1:])
