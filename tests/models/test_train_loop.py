"""The pair stream and the training loop: distinct-document batches, exact resume, 2-process DDP on CPU, the same
export bytes from scratch in another process."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from models.gur.pair_data import DataConfig, PairStream, heldout_pairs, is_heldout  # noqa: E402
from models.gur.tokenizer import train_wordpiece  # noqa: E402
from models.training.loop import TrainConfig, train  # noqa: E402
from models.training.schedule import get_lr  # noqa: E402
from tests.helpers.torchrun import run_two_ranks  # noqa: E402
from tests.helpers.train_shards import make_shards, run_config
from tests.helpers.trainer_process import interrupt_at_step, trainer_command  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny matrices: one intra-op thread (conftest)

REPO = Path(__file__).resolve().parents[2]
COMPARED = ("step", "lr", "loss", "lm_loss", "cl_loss", "train_acc", "heldout_acc", "heldout_cl")


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    return make_shards(tmp_path_factory)


def test_stream_batches_hold_distinct_documents_and_resume_exactly(shards):
    tok = train_wordpiece(["the cat sat on the mat"] * 10, vocab_size=100)
    cfg = DataConfig(str(shards), short_batch=8, long_batch=8, shuffle_buffer=32, heldout_fraction=0.2)
    stream = PairStream(cfg, tok)
    for _ in range(30):
        bucket = stream.buckets[0]
        pairs = stream.next_pairs("long")
        docs = [p[0] for p in pairs]
        assert len(docs) == 8 and len(set(docs)) == 8
        assert not any(is_heldout(d, 0.2) for d in docs)
    state = stream.state_dict()
    expected = [stream.next_batch() for _ in range(5)]
    again = PairStream(cfg, tok)
    again.load_state_dict(state)
    for (b1, x1), (b2, x2) in zip(expected, [again.next_batch() for _ in range(5)], strict=True):
        assert b1 == b2 and all(torch.equal(x1[k], x2[k]) for k in x1)
    assert bucket in ("short", "long")
    held = heldout_pairs(cfg, 1000)
    assert held and all(is_heldout(p[0], 0.2) for ps in held.values() for p in ps)


def test_stream_visits_every_training_pair_once_per_epoch(shards):
    tok = train_wordpiece(["x y z"] * 5, vocab_size=50)
    cfg = DataConfig(str(shards), short_batch=1, long_batch=1, shuffle_buffer=16, heldout_fraction=0.2)
    stream = PairStream(cfg, tok)
    train_pairs = {p for p in _all_pairs(shards, "long") if not is_heldout(p[0], 0.2)}
    seen = [stream.next_pairs("long")[0] for _ in range(len(train_pairs))]
    assert set(seen) == train_pairs and len(seen) == len(set(seen))
    assert stream.state["long"]["epoch"] == 0


def _all_pairs(shards: Path, bucket: str) -> list[tuple[str, str, str]]:
    import pyarrow.parquet as pq

    out = []
    for path in sorted((shards / bucket).glob("part-*.parquet")):
        cols = pq.read_table(path).to_pydict()
        out += list(zip(cols["doc_id"], cols["a"], cols["b"], strict=True))
    return out


def test_lr_schedule():
    cfg = TrainConfig(out_dir="", shards="", max_steps=100, warmup_steps=10, schedule="cosine", min_lr_ratio=0.1)

    def lr(step: int, cfg: TrainConfig) -> float:  # the multiplier `gur train` gives its LambdaLR
        return get_lr(step, cfg.max_steps, cfg.warmup_steps, cfg.schedule, min_ratio=cfg.min_lr_ratio)

    assert lr(0, cfg) == pytest.approx(0.1) and lr(9, cfg) == pytest.approx(1.0)
    assert lr(55, cfg) == pytest.approx(0.55) and lr(100, cfg) == pytest.approx(0.1)
    assert lr(50, dataclasses.replace(cfg, schedule="constant")) == 1.0


def test_interrupted_run_resumes_with_the_same_losses(shards, tmp_path, capsys):
    full = train(run_config(shards, tmp_path / "full", log_every=3))  # rows at 3 4(eval) 6 8: windows span step 4
    assert full["complete"] and full["step"] == 8
    logged = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step ") and " lr " in line]
    assert [line.split()[1] for line in logged] == ["3", "4", "6", "8"]
    assert all(re.search(r" eta \d+(s|m\d\ds|h\d\dm)$", line) for line in logged[:-1]), logged  # from the step rate
    assert " eta " not in logged[-1]  # the last step: nothing left
    # WordPiece training in `tokenizers` breaks frequency ties in hash order, so two fresh runs can differ in
    # vocabulary; a run saves its tokenizer before the first step and a resumed run reloads it. Share it here.
    shutil.copytree(tmp_path / "full" / "tokenizer", tmp_path / "cut" / "tokenizer")
    cut = run_config(
        shards, tmp_path / "cut", log_every=3, stop_at_step=6
    )  # checkpoint at 4, steps 5-6 lost, as if killed
    assert train(cut) == {"stopped_at": 6}
    assert [p.name for p in sorted((tmp_path / "cut" / "checkpoints").glob("*.pt"))] == ["step-00000004.pt"]
    resumed = train(dataclasses.replace(cut, stop_at_step=0))
    assert resumed["complete"]

    def curve(run: str) -> list[dict]:
        ckpt = torch.load(tmp_path / run / "checkpoints" / "step-00000008.pt", weights_only=False)
        return [{k: r.get(k) for k in COMPARED} for r in ckpt["metrics"]]

    assert [r["step"] for r in curve("cut")] == [0, 3, 4, 6, 8]  # step 0: held-out accuracy before training
    assert curve("cut") == curve("full")  # exact on CPU: same weights, data position, masks and dropout
    for name in ("metrics.parquet", "metrics.csv", "loss_curve.png", "samples.jsonl", "summary.json"):
        assert (tmp_path / "cut" / name).exists()
    assert (tmp_path / "cut" / "export" / "modules.json").exists()
    samples = [json.loads(line) for line in (tmp_path / "cut" / "samples.jsonl").read_text().splitlines()]
    assert {s["step"] for s in samples} == {4, 8} and "<extra_id_0>" in samples[0]["prompt"]


def test_a_time_budget_ends_a_run_as_complete_and_counts_the_time_of_a_resumed_run(shards, tmp_path, capsys):
    budget = 1e-6  # minutes: spent by the first step, checked at every logged step
    done = train(run_config(shards, tmp_path / "budget", max_steps=1000, max_minutes=budget, log_every=2))
    assert done["complete"] and done["step"] == 2 and done["stopped_by"] == "time budget (1e-06 min)"
    assert (tmp_path / "budget" / "export" / "modules.json").exists()
    summary = json.loads((tmp_path / "budget" / "summary.json").read_text())
    assert summary["step"] == 2 and summary["max_steps"] == 1000
    assert "time budget of 1e-06 min spent at step 2 of 1000: done" in capsys.readouterr().out
    # a run killed before its budget resumes with the time it had already spent
    cut = run_config(shards, tmp_path / "cut", max_steps=1000, max_minutes=1.0, ckpt_every=2, stop_at_step=3)
    assert train(cut) == {"stopped_at": 3}
    ckpt = torch.load(tmp_path / "cut" / "checkpoints" / "step-00000002.pt", weights_only=False)
    assert 0 < ckpt["trained_s"] < 60 and not ckpt["out_of_time"]
    ckpt["trained_s"] = 60.0  # as if the budget's minute had been spent before the kill
    torch.save(ckpt, tmp_path / "cut" / "checkpoints" / "step-00000002.pt")
    resumed = train(dataclasses.replace(cut, stop_at_step=0, log_every=1))
    assert resumed["complete"] and resumed["step"] == 3 and "stopped_by" in resumed


@pytest.mark.soak
@pytest.mark.slow
def test_two_process_ddp_on_cpu_trains(shards, tmp_path):
    cfg = run_config(shards, tmp_path / "ddp", max_steps=4, ckpt_every=2, eval_every=2, export=False)
    (tmp_path / "cfg.json").write_text(json.dumps(dataclasses.asdict(cfg)))
    proc = run_two_ranks(tmp_path / "cfg.json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((tmp_path / "ddp" / "summary.json").read_text())
    assert summary["complete"] and summary["step"] == 4
    ckpt = torch.load(tmp_path / "ddp" / "checkpoints" / "step-00000004.pt", weights_only=False)
    assert ckpt["world_size"] == 2 and len(ckpt["data"]) == 2 and ckpt["data"][0] != ckpt["data"][1]
    losses = [r["loss"] for r in ckpt["metrics"] if "loss" in r]  # the step-0 row holds held-out figures only
    assert len(losses) == 4 and all(torch.isfinite(torch.tensor(losses)))


def test_ctrl_c_saves_a_checkpoint_and_a_rerun_resumes_from_it(shards, tmp_path):
    """A real trainer process gets SIGINT mid-run: it finishes the step, saves, exits 3; the same
    command then resumes at that step and completes."""
    cfg = run_config(shards, tmp_path / "run", max_steps=60, ckpt_every=1000, eval_every=0, export=False)
    (tmp_path / "cfg.json").write_text(json.dumps(dataclasses.asdict(cfg)))
    lines = interrupt_at_step(tmp_path / "cfg.json", 3)
    cmd, env = trainer_command(tmp_path / "cfg.json")
    saved = sorted((tmp_path / "run" / "checkpoints").glob("step-*.pt"))
    assert len(saved) == 1 and 3 <= int(saved[0].stem.split("-")[1]) < 60
    assert any(line.startswith("stopped at step") for line in lines)
    again = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout[-3000:]
    assert f"resumed from {saved[0].name}" in again.stdout
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["step"] == 60


def test_head_is_dropped_for_warm_starts_unless_asked_for():
    base = dict(out_dir="o", shards="s")
    assert TrainConfig(**base).model_head() == "mlp"
    assert TrainConfig(**base, init_from="minilm/").model_head() == "none"
    assert TrainConfig(**base, init_from="minilm/", head="mlp").model_head() == "mlp"
    with pytest.raises(ValueError, match="head must be"):
        TrainConfig(**base, head="linear").model_head()


def test_a_run_from_scratch_exports_the_same_bytes_in_another_process(shards, tmp_path):
    """The same shards and config in two processes (other hash seeds): the tokenizer and the export are the same
    bytes (the WordPiece trainer of `tokenizers` gave another vocabulary in each process)."""
    config = dataclasses.asdict(run_config(shards, tmp_path / "x", max_steps=4))
    script = (
        "import sys, json; sys.path.insert(0, sys.argv[1])\n"
        "from models.training.loop import TrainConfig, train\n"
        "train(TrainConfig(**json.loads(sys.argv[2])))\n"
    )
    exports = []
    for run, hash_seed in (("a", "1"), ("b", "2")):
        out = tmp_path / run
        config["out_dir"] = str(out)
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        proc = subprocess.run(
            [sys.executable, "-c", script, str(REPO), json.dumps(config)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        files = sorted(p for folder in ("export", "tokenizer") for p in (out / folder).rglob("*") if p.is_file())
        exports.append({str(p.relative_to(out)): p.read_bytes() for p in files})
    assert "export/model.safetensors" in exports[0] and "tokenizer/tokenizer.json" in exports[0]
    assert exports[0].keys() == exports[1].keys()
    assert [k for k in exports[0] if exports[0][k] != exports[1][k]] == []


def test_a_gpu_run_at_the_defaults_is_told_the_faster_options_and_they_are_valid():
    from models.training.throughput import check_throughput_options, gpu_hint

    base = TrainConfig(out_dir="", shards="")
    hint = gpu_hint(base, "cuda")
    options = json.loads(re.search(r"'(\{.*\})'", hint).group(1))
    fast = dataclasses.replace(base, **options)  # every option is a TrainConfig field
    check_throughput_options(fast, torch.device("cuda"))  # and a valid combination on a GPU
    assert fast.attention == "sdpa" and fast.packing and fast.fused_lm_head and fast.compile
    assert gpu_hint(base, "cpu") == ""  # the CPU's measured best is another (docs/training.md)
    assert gpu_hint(fast, "cuda") == ""  # already set
    assert gpu_hint(dataclasses.replace(base, init_from="minilm/"), "cuda") == ""  # a warm start keeps eager
    assert gpu_hint(dataclasses.replace(base, method="tfcsg"), "cuda") == ""
