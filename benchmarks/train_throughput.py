"""GUR training throughput: tokens/s and MFU per attention kernel x packing x fused LM head x batch size.

    .venv/bin/python benchmarks/train_throughput.py --preset tiny                       # CPU, one row
    .venv/bin/python benchmarks/train_throughput.py --preset tiny --sweep               # CPU, every combination
    python benchmarks/train_throughput.py --preset small --bucket long --sweep --batch 64,128,256,512   # GPU, bf16
    .venv/bin/python benchmarks/train_throughput.py --demo-run --steps 600              # the train flow on demo shards

Batches are real: demo-corpus pairs (samples/train_shards.py), tokenised and span-masked by
`models.gur.pair_data`, padded to the bucket's fixed length or packed (`--packing on`). Every
combination collates the same pair draws with the same masking seed, so rows differ only in
layout. The model and its loss are the ones `gur train` trains: built by the GUR recipe
(`models/gur/recipe.py`) from the row's TrainConfig. The model step (forward, backward, AdamW) is
timed on pre-built batches, so it measures the model, not the loader; the loader's own rate is
printed next to it.

FLOPs are analytic (`flops_per_step`): per sequence of E encoder and D decoder tokens, with
d = d_model, a = heads x d_kv, f = d_ff (x3 gated, x2 otherwise) and V = vocabulary,

    encoder MACs = layers x (4 d a + f + 2 E a) x E
    decoder MACs = layers x ((6 d a + f + 2 D a + 2 E a) x D + 2 d a E) + V d D
    head MACs    = d^2 + d x vector_dim
    training FLOPs = 3 (forward + backward) x 2 (per multiply-add) x MACs

    MFU        = model FLOPs / step time / peak,  model FLOPs = the sum over sentences of their real lengths
    MFU shapes = the same over the shapes computed (rows x padded or packed width), pads included

with peak = `--peak-tflops` (default: H100 SXM dense bf16, 989 TFLOP/s). MFU is the useful-work
figure that packing moves; MFU shapes is what the first GPU figures in the README used
(fixed shapes: every pad counted). On a CPU both are printed against the same H100 peak, so only
their ratios between rows mean anything there.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import harness
import numpy as np
import torch

from models.gur.losses import GurLoss
from models.gur.model import GurModelConfig
from models.gur.packing import pad_label_width
from models.gur.pair_data import DataConfig, PairStream, collate
from models.gur.tokenizer import train_wordpiece
from models.training.measures import count_tokens

DRAW = 64  # most pairs one batch draws from distinct documents of the demo corpus (about 90 have pairs)


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


def demo_pairs(
    shards: Path, tok, bucket: str, batch: int, count: int, draw: int = DRAW
) -> list[list[tuple[str, str, str]]]:
    """`count` batches of `batch` pairs. A batch of more than `draw` pairs joins draws of `draw` pairs from distinct
    documents: the demo corpus has about 90 documents with pairs, too few for one draw of 128."""
    size = min(batch, draw)
    stream = PairStream(DataConfig(str(shards), short_batch=size, long_batch=size, heldout_fraction=0.0), tok)
    return [[p for _ in range(-(-batch // size)) for p in stream.next_pairs(bucket)][:batch] for _ in range(count)]


def layout_batches(pair_lists: list, tok, seq_len: int, fixed: bool, pack_len: int) -> list[dict]:
    """The same pairs and masking draws (seed 0) as padded or packed batches."""
    rng = np.random.default_rng(0)
    return [collate(p, tok, seq_len, rng, fixed_shape=fixed, pack_len=pack_len) for p in pair_lists]


def sentence_lengths(batch: dict) -> list[tuple[int, int]]:
    """(encoder tokens, target tokens) of every sentence, padded or packed."""
    if "segment_ids" in batch:
        enc = (batch["sentence_ends"] - batch["sentence_starts"] + 1).tolist()
        dec = torch.bincount(batch["decoder_segment_ids"].flatten(), minlength=len(enc) + 1)[1:].tolist()
        return list(zip(enc, dec, strict=True))
    enc = batch["attention_mask"].sum(1).tolist()
    dec = (batch["labels"] != -100).sum(1).tolist()
    return list(zip(enc, dec, strict=True))


def model_flops(cfg: GurModelConfig, batch: dict, objective: str) -> float:
    """Training FLOPs of the real tokens: each sentence at its own length, no pads."""
    return sum(flops_per_step(cfg, 1, e, d if objective != "cl" else 0, objective) for e, d in sentence_lengths(batch))


def shape_flops(cfg: GurModelConfig, batch: dict, objective: str) -> float:
    """Training FLOPs of the shapes computed: every row at the batch's padded (or packed) width."""
    rows, enc_len = batch["input_ids"].shape
    return flops_per_step(cfg, rows, enc_len, batch["labels"].shape[1] if objective != "cl" else 0, objective)


def loader_rate(shards: Path, tok, batch: int, seconds: float = 3.0) -> float:
    batch = min(batch, DRAW)  # batches from distinct documents: see demo_pairs
    stream = PairStream(DataConfig(str(shards), short_batch=batch, long_batch=batch, heldout_fraction=0.0), tok)
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        n += count_tokens(stream.next_batch()[1])
    return n / (time.perf_counter() - t0)


def synthetic_pairs(n: int, words: int, seed: int = 0) -> list[tuple[str, str, str]]:
    """Zipf-distributed pseudo-words, for machines without gensim: (doc_id, a, b) of `words` words."""
    rng = np.random.default_rng(seed)
    lexicon = ["".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), size=rng.integers(2, 9))) for _ in range(50_000)]
    ranks = np.minimum(rng.zipf(1.2, size=(n, 2, words)), len(lexicon)) - 1
    return [
        (f"d{i}", " ".join(lexicon[k] for k in ranks[i, 0]), " ".join(lexicon[k] for k in ranks[i, 1]))
        for i in range(n)
    ]


def parse_list(text: str, kind=str) -> list:
    return [kind(x) for x in text.split(",") if x]


def write_pairs(folder: Path, bucket: str, pairs: list[tuple[str, str, str]]) -> Path:
    """(doc_id, a, b) pairs as one shard of `bucket` (the shards table's columns): what the recipe's stream opens."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from samples.train_shards import SHARD_SCHEMA

    rows = [{"doc_id": d, "a": a, "b": b, "bucket": bucket} for d, a, b in pairs]
    (folder / bucket).mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=SHARD_SCHEMA), folder / bucket / "part-00000.parquet")
    return folder


def prepare(args: argparse.Namespace) -> tuple:
    """Tokenizer, the pair draws per batch size, and the shard folder they come from (a temporary one)."""
    seq_len = 32 if args.bucket == "short" else 128
    batches = parse_list(args.batch, int)
    tmp = Path(tempfile.mkdtemp(prefix="gur-bench-"))
    if args.synthetic:
        pairs = synthetic_pairs(8 * max(batches), words=seq_len)
        tok = train_wordpiece([t for p in pairs for t in p[1:]], vocab_size=args.vocab)
        draws = {b: [pairs[i * b : (i + 1) * b] for i in range(8)] for b in batches}
        return tok, draws, write_pairs(tmp, args.bucket, pairs)
    from samples.train_shards import demo_documents, write_demo_shards

    write_demo_shards(tmp, max_docs=args.docs)
    texts = [s for doc in demo_documents()[: args.docs] for s in doc[2]]
    tok = train_wordpiece(texts, vocab_size=args.vocab)
    return tok, {b: demo_pairs(tmp, tok, args.bucket, b, 8) for b in batches}, tmp


def gur_recipe(args, tok, shards: Path, out: Path, attention: str, packing: bool, fused: bool, pack_len: int):
    """The model and its loss as `gur train` builds them: the GUR recipe on this row's TrainConfig, with the
    tokenizer trained here (saved where the recipe looks for its run's own)."""
    from models.gur.recipe import build
    from models.training.config import TrainConfig

    tok.save(out / "tokenizer")
    cfg = TrainConfig(
        out_dir=str(out),
        shards=str(shards),
        preset=args.preset,
        objective=args.objective,
        vocab_size=tok.vocab_size,
        attention=attention,
        packing=packing,
        pack_len=pack_len,
        fused_lm_head=fused,
        fixed_shapes=args.fixed_shapes or args.compile,
        compile=args.compile,
        heldout_fraction=0.0,
        eval_every=0,
        seed=0,
    )
    return build(cfg, out, 0, 1, False, load_weights=True)


def measure(args, device, tok, pair_lists, attention: str, packing: bool, fused: bool, shards: Path) -> dict:
    """One combination: build the model, warm up, time `args.steps` steps on the pre-built batches.

    Also in the row, for checks: `loss_init` and `loss_final`, the first batch's loss in eval mode (no dropout,
    the model not compiled) before the first step and after the last (every kernel and layout must give the
    same `loss_init`; training must lower it), and `losses`, every step's training loss, warm-up first (read
    after the clock stops, so no step waits for the device)."""
    seq_len = 32 if args.bucket == "short" else 128
    fixed = args.fixed_shapes or args.compile
    pack_len = (args.pack_len or seq_len) if packing else 0
    batches = layout_batches(pair_lists, tok, seq_len, fixed, pack_len)
    with tempfile.TemporaryDirectory(prefix="gur-bench-run-") as out:
        recipe = gur_recipe(args, tok, shards, Path(out), attention, packing, fused, pack_len)
    model, loss_fn = recipe.model.to(device), recipe.loss
    cfg: GurModelConfig = model.config
    if args.compile:  # as the training loop compiles it (models/training/loop.py: loss_runner)
        loss_fn.model = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()
    on_device = [{k: v.to(device) for k, v in b.items()} for b in batches]

    def step(b: dict) -> torch.Tensor:
        with autocast:
            loss, _ = loss_fn(b)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    def eval_loss() -> float:
        with torch.no_grad(), autocast:
            model.eval()
            loss = GurLoss(model, args.objective)(on_device[0])[0].item()
            model.train()
        return loss

    loss_init = eval_loss()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    losses = [step(on_device[i % len(on_device)]) for i in range(args.warmup)]
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(args.steps):
        losses.append(step(on_device[i % len(on_device)]))
    if device.type == "cuda":
        torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / args.steps
    cpu_dt = (time.process_time() - c0) / args.steps
    losses = torch.stack(losses).float().tolist()
    loss_final = eval_loss()
    real = np.mean([count_tokens(b) for b in batches])
    if args.compile and packing:  # GurLoss pads a compiled model's label widths to 16: count the shapes it computes
        batches = [pad_label_width(b) for b in batches]
    computed = np.mean(
        [b["input_ids"].numel() + (b["labels"].numel() if args.objective != "cl" else 0) for b in batches]
    )
    useful = np.mean([model_flops(cfg, b, args.objective) for b in batches])
    shapes = np.mean([shape_flops(cfg, b, args.objective) for b in batches])
    peak = args.peak_tflops * 1e12
    row = {
        "attention": attention,
        "packing": packing,
        "fused_head": fused,
        "pairs_per_batch": len(pair_lists[0]),
        "rows_per_batch": round(float(np.mean([b["input_ids"].shape[0] for b in batches])), 1),
        "step_ms": round(dt * 1000, 2),
        "cpu_ms_per_step": round(cpu_dt * 1000, 2),
        "tokens_per_s": round(real / dt),
        "pad_share": round(1 - real / computed, 3),
        "model_tflops": round(useful / dt / 1e12, 4),
        "mfu": round(useful / dt / peak, 5),
        "mfu_shapes": round(shapes / dt / peak, 5),
        "loss_init": round(loss_init, 5),
        "loss_final": round(loss_final, 5),
        "losses": [round(x, 4) for x in losses],
    }
    if device.type == "cuda":
        row["max_mem_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return row


def benchmark(args: argparse.Namespace) -> dict:
    device = torch.device("cuda" if torch.cuda.is_available() and args.device != "cpu" else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = True  # as the training loop does
    if args.threads:
        torch.set_num_threads(args.threads)
    tok, draws, shards = prepare(args)
    try:
        return sweep(args, device, tok, draws, shards)
    finally:
        shutil.rmtree(shards, ignore_errors=True)


def sweep(args: argparse.Namespace, device, tok, draws: dict, shards: Path) -> dict:
    if args.sweep:
        combos = list(itertools.product(("eager", "sdpa", "flex"), (False, True), (False, True)))
    else:
        combos = [(args.attention, args.packing == "on", args.fused_head == "on")]
    rows = []
    for batch, pair_lists in draws.items():
        for attention, packing, fused in combos:
            if attention == "flex" and device.type != "cuda":
                rows.append(
                    {
                        "attention": attention,
                        "packing": packing,
                        "fused_head": fused,
                        "pairs_per_batch": batch,
                        "skipped": "no FlexAttention backward on the CPU (torch 2.13): to be measured on a GPU",
                    }
                )
                continue
            rows.append(measure(args, device, tok, pair_lists, attention, packing, fused, shards))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return {
        "device": torch.cuda.get_device_name()
        if device.type == "cuda"
        else f"cpu ({torch.get_num_threads()} threads)",
        "preset": args.preset,
        "objective": args.objective,
        "bucket": args.bucket,
        "compile": args.compile,
        "peak_tflops": args.peak_tflops,
        "vocab": tok.vocab_size,
        "loader_tokens_per_s": None if args.synthetic else round(loader_rate(shards, tok, max(draws))),
        "rows": rows,
    }


def markdown(result: dict) -> str:
    """The rows as a README table."""
    head = (
        "| attention | packing | fused head | pairs | tokens/s | model TFLOP/s | MFU | MFU shapes | pads | step ms |"
    )
    lines = [head, "|" + "---|" * 10]
    for r in result["rows"]:
        on = ("on" if r["packing"] else "off", "on" if r["fused_head"] else "off")
        if "skipped" in r:
            lines.append(
                f"| {r['attention']} | {on[0]} | {on[1]} | {r['pairs_per_batch']} | to be measured | | | | | |"
            )
            continue
        lines.append(
            f"| {r['attention']} | {on[0]} | {on[1]} | {r['pairs_per_batch']} | {r['tokens_per_s']:,} | "
            f"{r['model_tflops']:.4f} | {r['mfu']:.2%} | {r['mfu_shapes']:.2%} | {r['pad_share']:.0%} | "
            f"{r['step_ms']} |"
        )
    return "\n".join(lines)


def demo_run(args: argparse.Namespace) -> dict:
    """The `train` flow on the whole demo corpus's pairs (shards written by samples/train_shards.py)."""
    from flows.train import train_flow
    from samples.train_shards import write_demo_shards

    root = harness.workdir(args)
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
    p = harness.parser(__doc__, workdir_help="--demo-run: the data root")
    p.add_argument("--preset", default="tiny")
    p.add_argument("--objective", default="lm+cl", choices=["lm+cl", "cl", "lm"])
    p.add_argument("--bucket", default="long", choices=["short", "long"])
    p.add_argument("--batch", default="16", help="pairs per batch (2x sentences); a comma list gives the batch curve")
    p.add_argument("--attention", default="eager", choices=["eager", "sdpa", "flex"], help="without --sweep")
    p.add_argument("--packing", default="off", choices=["off", "on"], help="without --sweep")
    p.add_argument("--fused-head", default="off", choices=["off", "on"], help="without --sweep")
    p.add_argument("--pack-len", type=int, default=0, help="packed row width (default: the bucket's length)")
    p.add_argument("--sweep", action="store_true", help="every attention x packing x fused head combination")
    p.add_argument("--markdown", action="store_true", help="also print the rows as a README table")
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
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--pooling", default="cls", choices=["cls", "mean", "eos"])
    p.add_argument("--cl-inputs", default="masked", choices=["masked", "clean"], help="--demo-run: CL views")
    p.add_argument("--min-lcs", type=int, default=10, help="--demo-run: LCS filter of the demo pairs (chars)")
    args = p.parse_args()
    result = demo_run(args) if args.demo_run else benchmark(args)
    text = json.dumps(result, indent=2)
    print(text)
    if args.markdown and not args.demo_run:
        print(markdown(result))
    if args.demo_run:
        title = f"The train flow on the demo shards: {args.preset}, {args.steps} steps"
        figures = ["```json", text, "```"]
    else:
        title = f"GUR training throughput: {args.preset}, {args.bucket} bucket, batch {args.batch}, {result['device']}"
        figures = markdown(result).splitlines()
    harness.record(args, title, figures, result)


if __name__ == "__main__":
    main()
