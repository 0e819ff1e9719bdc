"""Encoder training, one loop for every method: config, recipe, optimizer, get_lr, evaluate, loop. Resumable; DDP.

A method's `Recipe` gives the model, loss, batch stream, held-out batches and export: `gur` (T5
on shard pairs, `build_gur`), `tfcsg` and `simcse` (a pretrained encoder on questions and their
keyword sequences, `build_questions`), `documents` (a pretrained encoder on pairs cut from long
documents, `build_documents`). Everything else (optimizer, schedule, accumulation,
bf16, DDP, signals, checkpoints, metrics, curves, export, summary) is the same code.

    python -m models.training.loop --config run.json                 # one process (CPU or one GPU)
    torchrun --nproc_per_node=8 -m models.training.loop --config run.json

`<out_dir>/checkpoints/step-NNNNNNNN.pt` is one dict (model, optimizer, scheduler, step, data
position of every rank, RNG states, metrics so far), written atomically every `ckpt_every`
steps and at exit; a restarted run continues from the newest one with the same loss curve.
At the end: `metrics.csv` / `metrics.parquet`, `loss_curve.png`, `samples.jsonl` (span infills
on fixed prompts at each checkpoint), `export/` and `summary.json` (written last).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import os
import signal
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.distributed as dist

from models.gur.attention import check_attention
from models.gur.losses import GurLoss, compute_loss_from_embeddings, in_batch_accuracy
from models.gur.model import GurModel, preset_config
from models.gur.pair_data import (
    DataConfig,
    PairStream,
    bucket_files,
    collate,
    count_tokens,
    distinct_doc_batches,
    heldout_pairs,
)
from models.gur.tokenizer import GurTokenizer, load_tokenizer, train_wordpiece
from models.training import presets as train_presets
from models.training.checkpoints import latest_checkpoint, load_checkpoint, rng_state, save_checkpoint, set_rng_state
from models.training.precision import autocast_for
from models.training.process import run_lock, watch_parent
from models.training.schedule import get_lr
from storage.atomic import atomic_path, atomic_write_text
from storage.progress import eta_seconds, format_duration

DEFAULT_PROMPTS = (
    "Anarchism is a political <extra_id_0> that rejects hierarchy.",
    "The president of the United States is <extra_id_0> every four years.",
    "Autism is a developmental disorder characterized by difficulties with <extra_id_0> interaction.",
)


@dataclass
class TrainConfig:
    out_dir: str
    shards: str  # gur: the shuffle stage folder; tfcsg / simcse: unused (see `questions`)
    method: str = train_presets.METHODS[0]  # gur | tfcsg | simcse (models.tfcsg.model) | documents
    preset: str = "tiny"
    objective: str = train_presets.OBJECTIVES[0]  # lm+cl (GUR-FULL), cl (the paper's GUR-LM), lm (GUR-CL)
    alpha: float = 1.0
    temperature: float = 0.1
    pooling: str = "cls"
    init_from: str = ""  # pretrained encoder folder to warm-start from (its tokenizer is used)
    head: str = "auto"  # "mlp", "none", or "auto": none when warm-starting, else mlp (models.gur.model)
    vocab_size: int = 8000  # WordPiece trained on the shards when not warm-starting
    tokenizer_sample: int = 200_000
    dropout: float = 0.1
    max_steps: int = 1000
    lr: float = 1e-4
    schedule: str = "constant"  # constant with warmup (the paper) or cosine (models.training.schedule.get_lr)
    warmup_steps: int = 100
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    grad_accum: int = 1
    short_seq_len: int = 32
    long_seq_len: int = 128
    short_batch: int = 64
    long_batch: int = 16
    shuffle_buffer: int = 4096
    heldout_fraction: float = 0.05
    heldout_key: str = "doc"
    fixed_shapes: bool = False  # pad to the bucket length: static shapes, for `compile` on a GPU
    cl_inputs: str = "masked"  # masked: CL on the masked inputs (the paper, one encoder pass); clean: a second pass
    # Throughput (gur, T5 from scratch; see `check_throughput_options`): the same losses, fewer wasted FLOPs.
    attention: str = "eager"  # eager | sdpa | flex (models.gur.attention; flex trains on a GPU only)
    packing: bool = False  # several sentences per row under a block-diagonal mask (models.gur.packing)
    pack_len: int = 0  # packed row width in tokens; 0: each bucket's sequence length
    fused_lm_head: bool = False  # LM head + cross-entropy in chunks, never the full logits (models.gur.fused_head)
    seed: int = 0
    dtype: str = "auto"  # auto: bf16 autocast on CUDA, fp32 on CPU; bf16 on either; fp32 (models.training.precision)
    compile: bool = False
    threads: int = 0
    log_every: int = 10
    eval_every: int = 100
    eval_pairs: int = 512
    eval_batch: int = 32
    ckpt_every: int = 200
    ckpt_every_s: float = 180.0  # also checkpoint when this many seconds passed since the last one (0: off)
    keep_checkpoints: int = 2
    prompts: list[str] = field(default_factory=lambda: list(DEFAULT_PROMPTS))
    stop_at_step: int = 0  # tests: leave the loop after this step with no final checkpoint (as if killed)
    export: bool = True
    # tfcsg / simcse (models.tfcsg.model, models.tfcsg.question_data); `temperature`, `pooling`, `dropout`,
    # `init_from`, `heldout_fraction`, `eval_batch` and `eval_pairs` apply to them too.
    questions: str = ""  # a keywords stage folder, or a file / folder with a text column
    text_field: str = "text"
    losses: str = "kw+s2s"  # '+'-joined from cl, kl, s2s, kw
    negatives: str = "topic-masked"  # all | topic-masked
    sampling: str = "random"  # random | topic-spread: batches that spread each GSDMM topic evenly
    # A nightly candidate on a grown corpus: train on the rows the keywords output `replay_since` (a fingerprint)
    # does not hold plus a seeded sample of those it holds, `replay_ratio` times as many (models.tfcsg.question_data).
    replay_since: str = ""
    replay_ratio: float = 1.0
    replay_source: str = ""  # the task sets it: the `replay_since` output's folder
    max_len: int = 32  # tokens of a question (and of its keyword sequence), [CLS] and [SEP] included
    batch_size: int = 64
    epochs: float = 0.0  # > 0: max_steps = the steps that show every training row this often
    cl_weight: float = 1.0
    kw_weight: float = 1.0
    kl_weight: float = 1.0
    s2s_weight: float = 1.0
    kl_detach_target: bool = True  # stop-gradient on h_t: the keyword vector is the KL's target
    kl_activation: str = "sigmoid"  # the paper's sigmoid on x_hat, or linear
    ae_dim: int = 256  # size of the auto-encoder's code z
    # Keeping the start model's general-purpose geometry (models.tfcsg.model; 0 / 1.0: off). The two anchors are
    # losses against a frozen copy of `init_from`; `interpolate` mixes the trained encoder's weights with the
    # start's at export, w * trained + (1 - w) * start, as a run of its own over the unmixed run (tasks.train).
    sim_anchor_weight: float = 0.0
    l2sp_weight: float = 0.0
    interpolate: float = 1.0
    # documents (models/documents/pairs.py): `max_len` is the query's length; `batch_size`, the anchors too.
    pair_kinds: str = "title+ict"
    pair_draw: str = "coin"  # one pair per document an epoch, or `each` kind it has
    passage_len: int = 128

    def model_head(self) -> str:
        if self.head not in ("auto", "mlp", "none"):
            raise ValueError(f"head must be auto, mlp or none, got {self.head!r}")
        return ("none" if self.init_from else "mlp") if self.head == "auto" else self.head

    def data_config(self) -> DataConfig:
        return DataConfig(
            self.shards,
            self.short_seq_len,
            self.long_seq_len,
            self.short_batch,
            self.long_batch,
            self.shuffle_buffer,
            self.seed,
            heldout_fraction=self.heldout_fraction,
            heldout_key=self.heldout_key,
            fixed_shapes=self.fixed_shapes,
            clean_views=self.cl_inputs == "clean" and self.objective != "lm",
            packing=self.packing,
            pack_len=self.pack_len,
        )


def check_throughput_options(cfg: TrainConfig, device: torch.device) -> None:
    """One-line errors for attention / packing / fused_lm_head values that cannot run."""
    check_attention(cfg.attention)
    changed = [
        name
        for name, default in (("attention", "eager"), ("packing", False), ("pack_len", 0), ("fused_lm_head", False))
        if getattr(cfg, name) != default
    ]
    if changed and (cfg.method != "gur" or cfg.init_from):
        raise ValueError(
            f"{', '.join(changed)}: options of the GUR T5 trained from scratch (method gur, no init_from)"
        )
    if cfg.pack_len and cfg.pack_len < max(cfg.short_seq_len, cfg.long_seq_len):
        raise ValueError(f"pack_len {cfg.pack_len} is shorter than a bucket's sequence length; use 0 or >= both")
    if cfg.attention == "flex" and device.type != "cuda":
        raise ValueError(
            "attention 'flex' trains on a GPU only (torch has no FlexAttention backward on the CPU); use sdpa"
        )


def gpu_hint(cfg: TrainConfig, device_type: str) -> str:
    """A line for a GUR run from scratch on a GPU at the throughput defaults: the measured faster options (not
    the default: a changed default would change every existing run's fingerprint and a CPU run's bytes)."""
    if device_type != "cuda" or cfg.method != "gur" or cfg.init_from:
        return ""
    if cfg.attention != "eager" or cfg.packing or cfg.fused_lm_head:
        return ""
    return (
        'GPU: --options \'{"attention": "sdpa", "packing": true, "fused_lm_head": true, "compile": true, '
        '"fixed_shapes": true}\' trains the same losses 4.6x faster on one H200 (docs/training.md)'
    )


def gather(obj: Any, world: int) -> list[Any]:
    if world == 1:
        return [obj]
    out: list[Any] = [None] * world
    dist.all_gather_object(out, obj)
    return out


def build_tokenizer(cfg: TrainConfig, tok_dir: Path) -> GurTokenizer:
    """Load `tok_dir` if present; else the warm-start folder's tokenizer or WordPiece trained on the shards."""
    if (tok_dir / "tokenizer_config.json").exists():
        return load_tokenizer(tok_dir)
    if cfg.init_from:
        tok = load_tokenizer(cfg.init_from)
    else:
        import pyarrow.parquet as pq

        texts: list[str] = []
        for path in [p for b in ("short", "long") for p in bucket_files(cfg.shards, b)]:
            cols = pq.read_table(path, columns=["a", "b"]).to_pydict()
            texts.extend(cols["a"] + cols["b"])
            if len(texts) >= cfg.tokenizer_sample:
                break
        tok = train_wordpiece(texts[: cfg.tokenizer_sample], vocab_size=cfg.vocab_size)
    with atomic_path(tok_dir) as tmp:
        tok.save(tmp)
    return load_tokenizer(tok_dir)


@torch.no_grad()
def evaluate(model, batches: list[dict[str, torch.Tensor]], device: torch.device, cfg: TrainConfig, pair=None) -> dict:
    """Held-out in-batch retrieval accuracy (chance = 1 / eval_batch) and CL loss on unmasked pairs.

    `pair(model, batch)` gives the two sides (default GUR's: the batch's 2N rows are the a then the b sentences).
    """
    model.eval()
    accs, losses = [], []
    for batch in batches:
        batch = {k: v.to(device) for k, v in batch.items()}
        a, b = (pair or _gur_eval_pair)(model, batch)
        accs.append(in_batch_accuracy(a, b))
        losses.append(float(compute_loss_from_embeddings(a, b, cfg.temperature)))
    model.train()
    return {
        "heldout_acc": float(np.mean(accs)) if accs else float("nan"),
        "heldout_cl": float(np.mean(losses)) if losses else float("nan"),
    }


@torch.no_grad()
def infill_samples(model: GurModel, tok: GurTokenizer, prompts: list[str], device: torch.device) -> list[dict]:
    """Greedy span infilling on fixed prompts (the paper's Table II style)."""
    model.eval()
    out = []
    for prompt in prompts:
        enc = tok.hf(prompt, return_tensors="pt").to(device)
        gen = model.seq2seq.generate(**enc, max_new_tokens=12, do_sample=False)
        text = tok.hf.decode(gen[0], skip_special_tokens=False)
        fill = text.split("<extra_id_0>", 1)[-1].split("<extra_id_1>")[0]
        for special in (tok.hf.pad_token, tok.hf.eos_token or tok.hf.sep_token, tok.hf.cls_token):
            fill = fill.replace(special, "")
        out.append({"prompt": prompt, "output": text, "filled": prompt.replace("<extra_id_0>", f"[{fill.strip()}]")})
    model.train()
    return out


def part_name(key: str) -> str:
    """A loss part's column in metrics.parquet: `lm` -> `lm_loss`, `acc` -> `train_acc`."""
    return "train_acc" if key == "acc" else f"{key}_loss"


def write_reports(out: Path, metrics: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    if not metrics:
        return
    keys = sorted({k for row in metrics for k in row})
    table = pa.table({k: [row.get(k) for row in metrics] for k in keys})
    pq.write_table(table, out / "metrics.parquet")
    pcsv.write_csv(table, out / "metrics.csv")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    steps = [r["step"] for r in metrics]
    for key in ("loss", *sorted({k for r in metrics for k in r if k.endswith("_loss")})):
        if any(key in r for r in metrics):
            axes[0].plot(steps, [r.get(key, np.nan) for r in metrics], label=key)
    axes[0].set_xlabel("step")
    axes[0].legend()
    for key in ("train_acc", "heldout_acc"):
        pts = [(r["step"], r[key]) for r in metrics if key in r and not math.isnan(r[key])]
        if pts:
            axes[1].plot(*zip(*pts, strict=True), marker="o" if key == "heldout_acc" else None, label=key)
    axes[1].set_xlabel("step")
    axes[1].set_ylabel("in-batch retrieval accuracy")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(out / "loss_curve.png", dpi=100)
    plt.close(fig)


@dataclass
class Recipe:
    """What differs between methods; the loop, optimizer, checkpoints and reports are shared."""

    model: torch.nn.Module  # .embed(ids, mask) -> (B, D) normalised, .num_params()
    loss: torch.nn.Module | None  # batch -> (loss, parts); None: the loop builds GurLoss (after compile)
    stream: Any  # .next_batch() -> (bucket, batch), .state_dict(), .load_state_dict(), .steps_for(epochs)
    eval_batches: list[dict[str, torch.Tensor]]
    eval_pair: Any  # (model, batch on device) -> (a, b): row i of a should retrieve row i of b
    model_config: dict[str, Any]
    export: Any  # (model, folder) -> None
    samples: Any = None  # model -> rows for samples.jsonl at each checkpoint, or None
    find_unused: bool = False  # DDP: parameters that some step does not use
    info: dict[str, Any] = field(default_factory=dict)  # goes to summary.json


def _gur_eval_pair(model, batch):
    return model.embed(batch["input_ids"], batch["attention_mask"]).chunk(2)


def build_gur(cfg: TrainConfig, out: Path, rank: int, world: int, ddp: bool, load_weights: bool) -> Recipe:
    """GUR: T5 (or bert2bert) on shard pairs, span-corruption LM + in-batch InfoNCE."""
    master = rank == 0
    if master:
        tok = build_tokenizer(cfg, out / "tokenizer")
    if ddp:
        dist.barrier()
    if not master:
        tok = load_tokenizer(out / "tokenizer")
    mcfg = preset_config(
        cfg.preset,
        vocab_size=tok.vocab_size,
        pad_id=tok.pad_id,
        eos_id=tok.eos_id,
        cls_id=tok.cls_id,
        pooling=cfg.pooling,
        init_from=cfg.init_from,
        head=cfg.model_head(),
        dropout=cfg.dropout,
        attention=cfg.attention,
        fused_lm_head=cfg.fused_lm_head,
    )
    torch.manual_seed(cfg.seed)  # the same initial weights on every rank
    model = GurModel(mcfg, load_weights=load_weights)
    eval_batches = []
    if master and cfg.eval_every:
        dcfg = cfg.data_config()
        for bucket, pairs in heldout_pairs(dcfg, cfg.eval_pairs).items():
            eval_batches += [
                collate(b, tok, dcfg.seq_len(bucket), None) for b in distinct_doc_batches(pairs, cfg.eval_batch)
            ]
        print(f"held-out: {len(eval_batches)} batches of {cfg.eval_batch} pairs (chance {1 / cfg.eval_batch:.3f})")
        if not eval_batches:  # a batch needs eval_batch held-out documents: say why accuracy is missing
            print(
                f"held-out: warning: fewer than {cfg.eval_batch} held-out documents have pairs; no held-out accuracy. "
                "Raise heldout_fraction or lower eval_batch (small corpora: 0.2 and 16)."
            )

    def export(trained: GurModel, folder: Path) -> None:
        from models.training.export import export_model

        export_model(trained, tok, folder, max_seq_length=cfg.long_seq_len)

    def samples(trained: GurModel) -> list[dict]:
        return infill_samples(trained, tok, cfg.prompts, next(trained.parameters()).device)

    return Recipe(
        model=model,
        loss=None,
        stream=PairStream(cfg.data_config(), tok, rank, world),
        eval_batches=eval_batches,
        eval_pair=_gur_eval_pair,
        model_config=dataclasses.asdict(mcfg),
        export=export,
        samples=samples if cfg.objective != "cl" else None,
        find_unused=cfg.objective != "lm+cl" or bool(cfg.init_from),
    )


def _question_eval_pair(model, batch):
    q = model.embed(batch["input_ids"], batch["attention_mask"])
    return q, model.embed(batch["kw_input_ids"], batch["kw_attention_mask"])


def check_question_options(cfg: TrainConfig) -> tuple[str, ...]:
    """The losses of a `tfcsg` / `simcse` run, after the checks that make a bad config one line."""
    from models.tfcsg.model import parse_losses

    if not cfg.init_from:
        raise ValueError(f"method {cfg.method!r} fine-tunes a pretrained encoder: set init_from to its folder")
    if not cfg.questions:
        raise ValueError(f"method {cfg.method!r} needs `questions`: a keywords stage folder or a text file")
    losses = parse_losses(cfg.losses)
    if cfg.method == "simcse" and losses != ("cl",):
        raise ValueError(f"simcse trains the `cl` loss alone, not {cfg.losses!r} (use method tfcsg)")
    if cfg.sim_anchor_weight < 0 or cfg.l2sp_weight < 0 or not 0 <= cfg.interpolate <= 1:
        raise ValueError("sim_anchor_weight and l2sp_weight must be >= 0, and interpolate within [0, 1]")
    return losses


def question_tokenizer(init_from: str, tok_dir: Path, rank: int, ddp: bool) -> Any:
    """The warm-start folder's tokenizer, saved once into the run folder (rank 0) and loaded from there."""
    from transformers import AutoTokenizer

    if rank == 0 and not (tok_dir / "tokenizer_config.json").exists():
        with atomic_path(tok_dir) as tmp:
            AutoTokenizer.from_pretrained(init_from).save_pretrained(str(tmp))
    if ddp:
        dist.barrier()
    return AutoTokenizer.from_pretrained(str(tok_dir))


def build_questions(cfg: TrainConfig, out: Path, rank: int, world: int, ddp: bool, load_weights: bool) -> Recipe:
    """TFCSG and SimCSE: a pretrained encoder on questions and their keyword sequences (models.tfcsg.model)."""
    from models.tfcsg.model import TfcsgLoss, TfcsgModel
    from models.tfcsg.question_data import QuestionConfig, QuestionData, QuestionStream
    from models.training.export import export_encoder

    losses = check_question_options(cfg)
    tok = question_tokenizer(cfg.init_from, out / "tokenizer", rank, ddp)
    qcfg = QuestionConfig(
        source=cfg.questions,
        text_field=cfg.text_field,
        max_len=cfg.max_len,
        batch_size=cfg.batch_size,
        seed=cfg.seed,
        heldout_fraction=cfg.heldout_fraction,
        need_keywords=bool({"kl", "s2s", "kw"} & set(losses)),
        need_s2s="s2s" in losses,
        sampling=cfg.sampling,
        replay_source=cfg.replay_source,
        replay_ratio=cfg.replay_ratio,
    )
    data = QuestionData(qcfg, tok)
    torch.manual_seed(cfg.seed)  # the same auto-encoder and LM head on every rank
    model = TfcsgModel(
        cfg.init_from,
        pooling=cfg.pooling,
        ae_dim=cfg.ae_dim,
        kl_activation=cfg.kl_activation,
        dropout=cfg.dropout,
        load_weights=load_weights,
    )
    loss = TfcsgLoss(
        model,
        cfg.losses,
        temperature=cfg.temperature,
        negatives=cfg.negatives,
        kl_weight=cfg.kl_weight,
        kl_detach_target=cfg.kl_detach_target,
        s2s_weight=cfg.s2s_weight,
        kw_weight=cfg.kw_weight,
        cl_weight=cfg.cl_weight,
        sim_anchor_weight=cfg.sim_anchor_weight,
        l2sp_weight=cfg.l2sp_weight,
    )
    eval_batches = data.heldout_batches(cfg.eval_batch, cfg.eval_pairs) if rank == 0 and cfg.eval_every else []
    counts = data.counts()
    if rank == 0:
        print(
            f"questions: {counts['train_rows']} to train on, {counts['heldout_rows']} held out "
            f"({len(eval_batches)} batches of {cfg.eval_batch}, chance {1 / cfg.eval_batch:.3f}); truncated to "
            f"{cfg.max_len} tokens: {counts['truncated_questions']} questions, {counts['truncated_keywords']} keyword "
            f"sequences; LM head {'from the checkpoint' if model.lm_head_loaded else 'new, tied to the embeddings'}",
            flush=True,
        )

    def export(trained: TfcsgModel, folder: Path) -> None:
        export_encoder(trained.encoder, tok, folder, pooling=cfg.pooling)

    return Recipe(
        model=model,
        loss=loss,
        stream=QuestionStream(data, rank, world),
        eval_batches=eval_batches,
        eval_pair=_question_eval_pair,
        model_config={
            "init_from": cfg.init_from,
            "pooling": cfg.pooling,
            "ae_dim": cfg.ae_dim,
            "kl_activation": cfg.kl_activation,
            "lm_head_loaded": model.lm_head_loaded,
        },
        export=export,
        find_unused=True,  # the auto-encoder and the LM head train only with kl and s2s
        info={"data": counts, "lm_head_loaded": model.lm_head_loaded, "losses": list(losses)},
    )


def build_documents(cfg: TrainConfig, out: Path, rank: int, world: int, ddp: bool, load_weights: bool) -> Recipe:
    """Documents: a pretrained encoder on (query, passage) pairs of long documents (models/documents/pairs.py),
    TFCSG's encoder and contrastive pair task (`kw`: row i's query finds row i's passage, tau 0.05, passages of
    the same document masked)."""
    from models.documents.pairs import DocumentPairConfig, DocumentPairs, DocumentStream
    from models.tfcsg.model import TfcsgLoss, TfcsgModel
    from models.training.export import export_encoder

    if not cfg.init_from:
        raise ValueError("method 'documents' fine-tunes a pretrained encoder: set init_from to its folder")
    if not cfg.questions:
        raise ValueError("method 'documents' needs `questions`: a split output folder (the sentences table)")
    if not 0 <= cfg.interpolate <= 1:
        raise ValueError(f"interpolate must be within [0, 1], got {cfg.interpolate}")
    tok = question_tokenizer(cfg.init_from, out / "tokenizer", rank, ddp)
    data = DocumentPairs(
        DocumentPairConfig(
            source=cfg.questions,
            kinds=cfg.pair_kinds,
            draw=cfg.pair_draw,
            max_len=cfg.max_len,
            passage_len=cfg.passage_len,
            batch_size=cfg.batch_size,
            seed=cfg.seed,
            heldout_fraction=cfg.heldout_fraction,
        ),
        tok,
    )
    model = TfcsgModel(cfg.init_from, pooling=cfg.pooling, dropout=cfg.dropout, load_weights=load_weights)
    loss = TfcsgLoss(model, "kw", temperature=cfg.temperature, negatives="topic-masked")
    eval_batches = data.heldout_batches(cfg.eval_batch, cfg.eval_pairs) if rank == 0 and cfg.eval_every else []
    counts = data.counts()
    if rank == 0:
        print(
            f"documents: {counts['train_documents']} to train on, {counts['train_rows']} pairs an epoch "
            f"({counts['with_title']} with a title, "
            f"{counts['with_ict']} with two sentences or more), {counts['heldout_rows']} held out "
            f"({len(eval_batches)} batches of {cfg.eval_batch}), {counts['no_pair']} without a pair; queries cut to "
            f"{cfg.max_len} tokens, passages to {cfg.passage_len}",
            flush=True,
        )

    def export(trained, folder: Path) -> None:
        export_encoder(trained.encoder, tok, folder, pooling=cfg.pooling)

    return Recipe(
        model=model,
        loss=loss,
        stream=DocumentStream(data, rank, world),
        eval_batches=eval_batches,
        eval_pair=_question_eval_pair,
        model_config={"init_from": cfg.init_from, "pooling": cfg.pooling, "pair_kinds": cfg.pair_kinds},
        export=export,
        find_unused=True,  # TFCSG's auto-encoder and LM head are not trained here
        info={"data": counts, "losses": ["kw"]},
    )


METHODS = {"gur": build_gur, "tfcsg": build_questions, "simcse": build_questions, "documents": build_documents}


def train(cfg: TrainConfig) -> dict[str, Any]:
    """Train (or resume) one run; the first rank holds the run folder's trainer lock throughout."""
    first_rank = int(os.environ.get("RANK", "0")) == 0
    with run_lock(Path(cfg.out_dir)) if first_rank else nullcontext():
        return _train(cfg)


def _train(cfg: TrainConfig) -> dict[str, Any]:
    ranks = init_ranks(cfg)
    if not ranks.ddp:
        return _train_ranks(cfg, ranks)
    # The process group must not die with the DDP model: the C++ Reducer drops its last reference while
    # holding the GIL, and gloo's destructor then waits for a worker thread that needs the GIL to free a
    # finished collective, so the rank hangs at exit (pytorch#56297; under load, about one run in five).
    # This handle outlives the model; dropped here, through the Python binding, the GIL is released first.
    world = dist.group.WORLD
    summary = _train_ranks(cfg, ranks)
    gc.collect()  # the model, should a reference cycle hold it, goes now, while `world` still holds the group
    dist.barrier()
    dist.destroy_process_group()
    del world
    return summary


def _train_ranks(cfg: TrainConfig, ranks: Ranks) -> dict[str, Any]:
    autocast = autocast_for(ranks.device, cfg.dtype)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    watch_parent()

    if cfg.method not in METHODS:
        raise ValueError(f"unknown method {cfg.method!r}; choose from {sorted(METHODS)}")
    check_throughput_options(cfg, ranks.device)
    if ranks.master and (hint := gpu_hint(cfg, ranks.device.type)):
        print(hint, flush=True)
    resume = latest_checkpoint(out / "checkpoints")
    ckpt = load_checkpoint(resume) if resume else None
    recipe = METHODS[cfg.method](cfg, out, ranks.rank, ranks.world, ranks.ddp, load_weights=ckpt is None)
    model = recipe.model
    if cfg.epochs > 0:
        cfg = dataclasses.replace(cfg, max_steps=recipe.stream.steps_for(cfg.epochs))
        if ranks.master:
            print(f"{cfg.epochs:g} epochs = {cfg.max_steps} steps", flush=True)
    if ckpt:
        model.load_state_dict(ckpt["model"])
    model.to(ranks.device)
    optimizer, scheduler = build_optimizer(model, cfg, ranks.device)
    run = Run(cfg, ranks, out, recipe, optimizer, scheduler)
    if ckpt:
        restore(run, ckpt, resume.name)
    else:
        torch.manual_seed(cfg.seed + ranks.rank)  # dropout differs per rank
    del ckpt
    runner = loss_runner(recipe, cfg, ranks)
    stop = stop_on_signals()

    if ranks.master and recipe.eval_batches and run.step == 0:  # where it starts: chance, or the init's skill
        row = {"step": 0, **evaluate(model, recipe.eval_batches, ranks.device, cfg, recipe.eval_pair)}
        run.metrics.append(row)
        print(f"step 0 heldout_acc {row['heldout_acc']:.4g} heldout_cl {row['heldout_cl']:.4g}", flush=True)
    model.train()
    t0, tokens, last_saved, saved_at = time.time(), 0, run.step, time.time()
    started = (t0, run.step)  # the measured step rate (this process, evaluations included) gives the ETA
    while run.step < cfg.max_steps and not stop["flag"]:
        done = train_step(run, runner, autocast)
        tokens += done.tokens
        eval_now = bool(cfg.eval_every) and (run.step % cfg.eval_every == 0 or run.step == cfg.max_steps)
        if run.step % cfg.log_every == 0 or run.step == cfg.max_steps or eval_now:
            log_row(run, done, tokens, time.time() - t0, eval_now, started)
            t0, tokens = time.time(), 0
        if cfg.stop_at_step and run.step == cfg.stop_at_step:
            return {"stopped_at": run.step}
        if checkpoint_due(run, stop, saved_at):
            save_run(run)
            last_saved, saved_at = run.step, time.time()
    if last_saved != run.step:
        save_run(run)
    if stop["flag"] and ranks.master and run.step < cfg.max_steps:
        print(f"stopped at step {run.step} by a signal; checkpoint saved, rerun to resume", flush=True)
    return finish(run)


@dataclass(frozen=True)
class Ranks:
    """Where this process trains: rank `rank` of `world` (torchrun's environment; 0 of 1 without it)."""

    ddp: bool
    rank: int
    world: int
    local_rank: int
    device: torch.device

    @property
    def master(self) -> bool:
        return self.rank == 0


def init_ranks(cfg: TrainConfig) -> Ranks:
    """Join the process group under torchrun (NCCL on GPUs, else gloo), pick this rank's device and threads."""
    ddp = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if ddp:
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if ddp else (0, 1)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    return Ranks(ddp, rank, world, local_rank, device)


def build_optimizer(
    model: torch.nn.Module, cfg: TrainConfig, device: torch.device
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW with weight decay on matrices only, and `get_lr`'s schedule as a multiplier of `cfg.lr`."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=(0.9, 0.999),
        fused=device.type == "cuda",
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: get_lr(s, cfg.max_steps, cfg.warmup_steps, cfg.schedule, min_ratio=cfg.min_lr_ratio)
    )
    return optimizer, scheduler


@dataclass
class Run:
    """One run between steps: what a checkpoint saves (model, optimizer, schedule, step, metrics, the
    window of per-step stats not yet logged) and where it goes."""

    cfg: TrainConfig
    ranks: Ranks
    out: Path
    recipe: Recipe
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    step: int = 0
    metrics: list[dict[str, Any]] = field(default_factory=list)
    window: dict[str, Any] = field(default_factory=lambda: {"sum": None, "n": 0})  # stats summed since the last row

    @property
    def model(self) -> torch.nn.Module:
        return self.recipe.model


def restore(run: Run, ckpt: dict[str, Any], name: str) -> None:
    """Continue from checkpoint `ckpt`: optimizer, schedule, step and metrics; with the same number of ranks
    also each rank's data position, RNG state and unlogged window (else the data streams restart)."""
    master = run.ranks.master
    run.optimizer.load_state_dict(ckpt["optimizer"])
    run.scheduler.load_state_dict(ckpt["scheduler"])
    run.step, run.metrics = ckpt["step"], ckpt["metrics"]
    if ckpt["world_size"] == run.ranks.world:
        run.window = ckpt["window"][run.ranks.rank]
        run.recipe.stream.load_state_dict(ckpt["data"][run.ranks.rank])
        set_rng_state(ckpt["rng"][run.ranks.rank])
    elif master:
        print(f"resuming {run.ranks.world} ranks from {ckpt['world_size']}: data streams restart at their seeds")
    if master:
        print(f"resumed from {name} at step {run.step}")


def loss_runner(recipe: Recipe, cfg: TrainConfig, ranks: Ranks) -> torch.nn.Module:
    """What a step calls on a batch: the recipe's loss (GUR's is built here, around the compiled model),
    wrapped in DDP across ranks."""
    model = recipe.model
    if recipe.loss is None:
        recipe.loss = GurLoss(
            torch.compile(model) if cfg.compile else model, cfg.objective, cfg.alpha, cfg.temperature
        )
    elif cfg.compile:
        recipe.loss.model = torch.compile(model)
    if not ranks.ddp:
        return recipe.loss
    return torch.nn.parallel.DistributedDataParallel(
        recipe.loss,
        device_ids=[ranks.local_rank] if ranks.device.type == "cuda" else None,
        find_unused_parameters=recipe.find_unused,
    )


def stop_on_signals() -> dict[str, bool]:
    """SIGTERM (a scheduler, `kill`) and SIGINT (Ctrl-C) set the flag: the loop finishes the step, saves a
    checkpoint and exits."""
    stop = {"flag": False}
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.update(flag=True))
    return stop


class StepDone(NamedTuple):
    lr: float  # the rate this step used
    tokens: int  # tokens in this rank's batches
    parts: list[str]  # names of the loss parts, in the order of the window's stats after the loss


def train_step(run: Run, runner: torch.nn.Module, autocast: Any) -> StepDone:
    """One optimizer step over `grad_accum` micro-batches; adds the step's mean loss and parts to the window."""
    cfg, device, ddp = run.cfg, run.ranks.device, run.ranks.ddp
    parts_sum: dict[str, torch.Tensor] = {}
    loss_sum = torch.zeros((), device=device)
    tokens = 0
    for micro in range(cfg.grad_accum):
        _, batch = run.recipe.stream.next_batch()
        tokens += count_tokens(batch)
        batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        sync = micro == cfg.grad_accum - 1
        with runner.no_sync() if ddp and not sync else nullcontext(), autocast:
            loss, parts = runner(batch)
        (loss / cfg.grad_accum).backward()
        loss_sum += loss.detach() / cfg.grad_accum
        for k, v in parts.items():
            parts_sum[k] = parts_sum.get(k, 0) + v.detach().float().to(device) / cfg.grad_accum
    if cfg.grad_clip:
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), cfg.grad_clip)
    lr = run.optimizer.param_groups[0]["lr"]
    run.optimizer.step()
    run.scheduler.step()
    run.optimizer.zero_grad(set_to_none=True)
    run.step += 1
    stats = torch.stack([loss_sum, *parts_sum.values()]).to(device)  # (1 + parts,) this step, this rank
    window = run.window
    window["sum"] = stats if window["sum"] is None else window["sum"].to(device) + stats
    window["n"] += 1
    return StepDone(lr, tokens, list(parts_sum))


def log_row(run: Run, done: StepDone, tokens: int, elapsed: float, eval_now: bool, started: tuple[float, int]) -> None:
    """Append a metrics row (the window's means over ranks, tokens/s since the last row, held-out metrics
    when `eval_now`) and print it on rank 0 with the ETA at the step rate since `started` (time, step)."""
    cfg, ranks = run.cfg, run.ranks
    stats = run.window["sum"] / run.window["n"]  # mean over the steps since the last row
    run.window.update(sum=None, n=0)
    if ranks.ddp:
        dist.all_reduce(stats, op=dist.ReduceOp.AVG)
    n_tokens = sum(gather(tokens, ranks.world))
    row = {"step": run.step, "lr": done.lr, "loss": float(stats[0]), "tokens_per_s": n_tokens / max(elapsed, 1e-9)}
    row.update({part_name(k): float(v) for k, v in zip(done.parts, stats[1:], strict=True)})
    recipe = run.recipe
    if eval_now and ranks.master and recipe.eval_batches:
        row.update(evaluate(run.model, recipe.eval_batches, ranks.device, cfg, recipe.eval_pair))
    run.metrics.append(row)
    if ranks.master:
        line = " ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items())
        eta = eta_seconds(run.step - started[1], cfg.max_steps - started[1], time.time() - started[0])
        if eta is not None and run.step < cfg.max_steps:
            line += f" eta {format_duration(eta)}"
        print(line, flush=True)


def checkpoint_due(run: Run, stop: dict[str, bool], saved_at: float) -> bool:
    """A checkpoint every `ckpt_every` steps, and after `ckpt_every_s` seconds without one (so an early kill of
    a slow run still leaves something to resume from). Under DDP the ranks agree on it and on `stop`."""
    cfg, step = run.cfg, run.step
    time_due = bool(cfg.ckpt_every_s) and time.time() - saved_at >= cfg.ckpt_every_s
    if run.ranks.ddp:
        if step % cfg.log_every == 0:
            # Ranks agree on stopping and on saving after the same step (or the others would
            # wait in a collective forever); only every log_every steps, since `.item()` waits.
            flags = torch.tensor([float(stop["flag"]), float(time_due)], device=run.ranks.device)
            dist.all_reduce(flags, op=dist.ReduceOp.MAX)
            stop["flag"], time_due = bool(flags[0].item()), bool(flags[1].item())
        else:
            time_due = False
    return step % cfg.ckpt_every == 0 or time_due


def save_run(run: Run) -> None:
    """A checkpoint of the run (every rank sends its data position, RNG state and window; rank 0 writes),
    and the recipe's samples at this step."""
    world, window = run.ranks.world, run.window
    data = gather(run.recipe.stream.state_dict(), world)
    rngs = gather(rng_state(), world)
    windows = gather({"sum": None if window["sum"] is None else window["sum"].cpu(), "n": window["n"]}, world)
    if not run.ranks.master:
        return
    state = {
        "model": run.model.state_dict(),
        "optimizer": run.optimizer.state_dict(),
        "scheduler": run.scheduler.state_dict(),
        "step": run.step,
        "data": data,
        "rng": rngs,
        "metrics": run.metrics,
        "window": windows,
        "world_size": world,
        "config": dataclasses.asdict(run.cfg),
        "model_config": run.recipe.model_config,
    }
    save_checkpoint(run.out / "checkpoints", state, run.cfg.keep_checkpoints)
    if run.recipe.samples is not None:
        with (run.out / "samples.jsonl").open("a") as f:
            for row in run.recipe.samples(run.model):
                f.write(json.dumps({"step": run.step, **row}, ensure_ascii=False) + "\n")


def finish(run: Run) -> dict[str, Any]:
    """The run's summary; when complete, rank 0 writes the reports, the export and `summary.json` (last)."""
    cfg, metrics = run.cfg, run.metrics
    summary: dict[str, Any] = {"step": run.step, "complete": run.step >= cfg.max_steps}
    if run.ranks.master and summary["complete"]:
        write_reports(run.out, metrics)
        if cfg.export:
            run.recipe.export(run.model, run.out / "export")
        evals = [r for r in metrics if "heldout_acc" in r]
        summary.update(
            final=metrics[-1] if metrics else {},
            heldout_acc=[(r["step"], r["heldout_acc"]) for r in evals],
            chance=1 / cfg.eval_batch,
            params=run.model.num_params(),
            export="export" if cfg.export else None,
            max_steps=cfg.max_steps,
            **run.recipe.info,
        )
        atomic_write_text(run.out / "summary.json", json.dumps(summary, indent=2) + "\n")
    return summary


def load_config(path: str | Path) -> TrainConfig:
    return TrainConfig(**json.loads(Path(path).read_text()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True, help="JSON file with TrainConfig fields")
    args = parser.parse_args(argv)
    summary = train(load_config(args.config))
    raise SystemExit(0 if summary.get("complete") else 3)


if __name__ == "__main__":
    main()
