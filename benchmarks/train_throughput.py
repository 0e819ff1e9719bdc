"""GUR training throughput: tokens/s (and MFU on a GPU) for a preset, plus the data pipeline's rate.

    .venv/bin/python benchmarks/train_throughput.py --preset tiny                       # CPU
    python benchmarks/train_throughput.py --preset small --bucket long --batch 256      # GPU, bf16
    .venv/bin/python benchmarks/train_throughput.py --demo-run --steps 600              # the train flow on demo shards

Batches are real: demo-corpus pairs (tests/train_shards.py), tokenised and span-masked by
`models.pair_data`, padded to the bucket's fixed length. The model step (forward, backward,
AdamW) is timed on pre-built batches, so it measures the model, not the loader; the loader's
own rate is printed next to it. MFU = analytic FLOPs of the padded shapes (forward + backward
= 3x forward, 2 FLOPs per multiply-add) / step time / peak (`--peak-tflops`, default: H100
SXM dense bf16, 989).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

import numpy as np  # noqa: E402
import torch  # noqa: E402

from models.gur_t5 import GurModel, GurModelConfig, preset_config  # noqa: E402
from models.losses import GurLoss  # noqa: E402
from models.pair_data import DataConfig, PairStream, collate, count_tokens  # noqa: E402
from models.tokenizer import train_wordpiece  # noqa: E402


def flops_per_step(cfg: GurModelConfig, rows: int, enc_len: int, dec_len: int, objective: str = "lm+cl") -> float:
    """Training FLOPs for `rows` sequences of `enc_len` encoder and `dec_len` decoder tokens."""
    d, hd, ff, v = cfg.d_model, cfg.num_heads * cfg.d_kv, cfg.d_ff, cfg.vocab_size
    ffn = (3 if cfg.feed_forward_proj.startswith("gated") else 2) * d * ff
    enc = cfg.num_layers * (4 * d * hd + ffn + 2 * enc_len * hd) * enc_len  # per sequence, multiply-adds
    macs = enc + d * d + d * cfg.vector_dim
    if objective != "cl":
        dec_tok = 4 * d * hd + 2 * d * hd + ffn + 2 * dec_len * hd + 2 * enc_len * hd  # self, cross q/o, ffn, scores
        macs += cfg.num_decoder_layers * (dec_tok * dec_len + 2 * d * hd * enc_len) + d * v * dec_len
    return 3 * 2 * macs * rows


def demo_batches(shards: Path, tok, bucket: str, batch: int, count: int, seq_len: int, fixed: bool) -> list[dict]:
    stream = PairStream(DataConfig(str(shards), short_batch=batch, long_batch=batch, heldout_fraction=0.0), tok)
    rng = np.random.default_rng(0)
    return [collate(stream.next_pairs(bucket), tok, seq_len, rng, fixed_shape=fixed) for _ in range(count)]


def loader_rate(shards: Path, tok, batch: int, seconds: float = 3.0) -> float:
    stream = PairStream(DataConfig(str(shards), short_batch=batch, long_batch=batch, heldout_fraction=0.0), tok)
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        n += count_tokens(stream.next_batch()[1])
    return n / (time.perf_counter() - t0)


def synthetic_pairs(n: int, words: int, seed: int = 0) -> list[tuple[str, str, str]]:
    """Zipf-distributed pseudo-words, for machines without pyarrow/gensim: (doc_id, a, b) of `words` words."""
    rng = np.random.default_rng(seed)
    lexicon = ["".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), size=rng.integers(2, 9))) for _ in range(50_000)]
    ranks = np.minimum(rng.zipf(1.2, size=(n, 2, words)), len(lexicon)) - 1
    return [
        (f"d{i}", " ".join(lexicon[k] for k in ranks[i, 0]), " ".join(lexicon[k] for k in ranks[i, 1]))
        for i in range(n)
    ]


def benchmark(args: argparse.Namespace) -> dict:
    device = torch.device("cuda" if torch.cuda.is_available() and args.device != "cpu" else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = True  # as the training loop does
    if args.threads:
        torch.set_num_threads(args.threads)
    seq_len = 32 if args.bucket == "short" else 128
    fixed = args.fixed_shapes or args.compile
    tmp = None
    if args.synthetic:
        pairs = synthetic_pairs(8 * args.batch, words=seq_len)
        tok = train_wordpiece([t for p in pairs for t in p[1:]], vocab_size=args.vocab)
        rng = np.random.default_rng(0)
        chunks = [pairs[i * args.batch : (i + 1) * args.batch] for i in range(8)]
        batches = [collate(c, tok, seq_len, rng, fixed_shape=fixed) for c in chunks]
    else:
        from train_shards import demo_documents, write_demo_shards

        tmp = Path(tempfile.mkdtemp(prefix="gur-bench-"))
        write_demo_shards(tmp, max_docs=args.docs)
        texts = [s for doc in demo_documents()[: args.docs] for s in doc[2]]
        tok = train_wordpiece(texts, vocab_size=args.vocab)
        batches = demo_batches(tmp, tok, args.bucket, args.batch, 8, seq_len, fixed)
    cfg = preset_config(
        args.preset, vocab_size=tok.vocab_size, pad_id=tok.pad_id, eos_id=tok.eos_id, cls_id=tok.cls_id
    )
    torch.manual_seed(0)
    model = GurModel(cfg).to(device)
    loss_fn = GurLoss(torch.compile(model) if args.compile else model, args.objective)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()
    batches = [{k: v.to(device) for k, v in b.items()} for b in batches]

    def step(b: dict) -> None:
        with autocast:
            loss, _ = loss_fn(b)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for i in range(args.warmup):
        step(batches[i % len(batches)])
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(args.steps):
        step(batches[i % len(batches)])
    if device.type == "cuda":
        torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / args.steps
    real = np.mean([count_tokens(b) for b in batches])
    rows = 2 * args.batch
    enc_len = np.mean([b["input_ids"].shape[1] for b in batches])
    dec_len = np.mean([b["labels"].shape[1] for b in batches]) if args.objective != "cl" else 0
    padded = rows * (enc_len + dec_len)
    flops = np.mean(
        [flops_per_step(cfg, rows, b["input_ids"].shape[1], b["labels"].shape[1], args.objective) for b in batches]
    )
    result = {
        "device": torch.cuda.get_device_name()
        if device.type == "cuda"
        else f"cpu ({torch.get_num_threads()} threads)",
        "preset": args.preset,
        "params_m": round(model.num_params() / 1e6, 2),
        "objective": args.objective,
        "bucket": args.bucket,
        "pairs_per_batch": args.batch,
        "step_ms": round(dt * 1000, 2),
        "tokens_per_s": round(real / dt),
        "padded_tokens_per_s": round(padded / dt),
        "tflops": round(flops / dt / 1e12, 3),
        "compile": args.compile,
        "mean_padded_len": [round(float(enc_len), 1), round(float(dec_len), 1)],
        "loader_tokens_per_s": round(loader_rate(tmp, tok, args.batch)) if tmp else None,
        "vocab": tok.vocab_size,
    }
    if device.type == "cuda":
        result["mfu"] = round(flops / dt / (args.peak_tflops * 1e12), 4)
        result["max_mem_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return result


def demo_run(args: argparse.Namespace) -> dict:
    """The `train` flow on the whole demo corpus's pairs (shards written by the test helper)."""
    from train_shards import write_demo_shards

    from flows.train import train_flow

    root = Path(args.root or tempfile.mkdtemp(prefix="gur-demo-"))
    name = f"demo-wiki-lcs{args.min_lcs}"  # pairs: title/sentence and sentences <= 3 apart sharing >= min_lcs chars
    if not (root / "shuffle" / name / "_manifest.json").exists():
        print("shards:", write_demo_shards(root / "shuffle" / name, min_lcs=args.min_lcs, window=3))
    options = dict(
        vocab_size=args.vocab,
        short_batch=32,
        long_batch=16,
        warmup_steps=50,
        log_every=25,
        eval_every=max(1, args.steps // 6),
        eval_batch=16,
        eval_pairs=512,
        heldout_fraction=0.2,
        ckpt_every=max(1, args.steps // 3),
        threads=args.threads or 1,
        cl_inputs=args.cl_inputs,
    )
    shards = {"stage": "shuffle", "fingerprint": name, "path": f"shuffle/{name}"}
    t0 = time.time()
    ref = train_flow(
        shards=shards,
        root=str(root),
        preset=args.preset,
        steps=args.steps,
        lr=args.lr,
        objective=args.objective,
        pooling=args.pooling,
        options=options,
    )
    summary = json.loads((root / ref["path"] / "summary.json").read_text())
    return {
        "root": str(root),
        "ref": ref,
        "wall_s": round(time.time() - t0),
        "chance": summary["chance"],
        "heldout_acc": summary["heldout_acc"],
        "final": summary["final"],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="tiny")
    p.add_argument("--objective", default="lm+cl", choices=["lm+cl", "cl", "lm"])
    p.add_argument("--bucket", default="long", choices=["short", "long"])
    p.add_argument("--batch", type=int, default=16, help="pairs per batch (2x rows)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--docs", type=int, default=None, help="demo documents to use (default: all 106)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu"])
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--synthetic", action="store_true", help="Zipf pseudo-word pairs (no pyarrow/gensim needed)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (implies --fixed-shapes)")
    p.add_argument("--fixed-shapes", action="store_true", help="pad batches to the bucket length (32 / 128)")
    p.add_argument("--peak-tflops", type=float, default=989.0)
    p.add_argument("--demo-run", action="store_true", help="run the train flow on the demo shards instead")
    p.add_argument("--root", default="", help="data root for --demo-run")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--pooling", default="cls", choices=["cls", "mean", "eos"])
    p.add_argument("--cl-inputs", default="masked", choices=["masked", "clean"], help="--demo-run: CL views")
    p.add_argument("--min-lcs", type=int, default=10, help="--demo-run: LCS filter of the demo pairs (chars)")
    args = p.parse_args()
    print(json.dumps(demo_run(args) if args.demo_run else benchmark(args), indent=2))


if __name__ == "__main__":
    main()
