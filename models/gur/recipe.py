"""The `gur` method's Recipe: the GUR T5 (or bert2bert) on the pair shards, span-corruption LM + in-batch InfoNCE,
its WordPiece tokenizer (trained on the shards, or the warm start's) and span-infill samples at checkpoints."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from models.gur.losses import GurLoss
from models.gur.model import GurModel, preset_config
from models.gur.pair_data import DataConfig, PairStream, bucket_files, collate, distinct_doc_batches, heldout_pairs
from models.gur.tokenizer import GurTokenizer, load_tokenizer, train_wordpiece
from models.training.recipe import Recipe, in_loop_batches
from storage.atomic import atomic_path

if TYPE_CHECKING:
    from models.training.config import TrainConfig


def data_config(cfg: TrainConfig) -> DataConfig:
    """The shard stream's settings from a run's config."""
    return DataConfig(
        cfg.shards,
        cfg.short_seq_len,
        cfg.long_seq_len,
        cfg.short_batch,
        cfg.long_batch,
        cfg.shuffle_buffer,
        cfg.seed,
        heldout_fraction=cfg.heldout_fraction,
        heldout_key=cfg.heldout_key,
        fixed_shapes=cfg.fixed_shapes,
        clean_views=cfg.cl_inputs == "clean" and cfg.objective != "lm",
        packing=cfg.packing,
        pack_len=cfg.pack_len,
    )


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


def eval_pair(model, batch):
    return model.embed(batch["input_ids"], batch["attention_mask"]).chunk(2)


def build(cfg: TrainConfig, out: Path, rank: int, world: int, ddp: bool, load_weights: bool) -> Recipe:
    """GUR: T5 (or bert2bert) on shard pairs, span-corruption LM + in-batch InfoNCE."""
    master = rank == 0
    tok = shared_tokenizer(cfg, out / "tokenizer", master, ddp)
    mcfg = gur_model_config(cfg, tok)
    torch.manual_seed(cfg.seed)  # the same initial weights on every rank
    model = GurModel(mcfg, load_weights=load_weights)
    eval_batches = heldout_batches(cfg, data_config(cfg), tok, rank)
    if master and cfg.eval_every:
        print_heldout(cfg, eval_batches)

    def export(trained: GurModel, folder: Path) -> None:
        from models.gur.export import export_model

        export_model(trained, tok, folder, max_seq_length=cfg.long_seq_len)

    def samples(trained: GurModel) -> list[dict]:
        return infill_samples(trained, tok, cfg.prompts, next(trained.parameters()).device)

    return Recipe(
        model=model,
        loss=GurLoss(model, cfg.objective, cfg.alpha, cfg.temperature),
        stream=PairStream(data_config(cfg), tok, rank, world),
        eval_batches=eval_batches,
        eval_pair=eval_pair,
        model_config=dataclasses.asdict(mcfg),
        export=export,
        samples=samples if cfg.objective != "cl" else None,
        find_unused=cfg.objective != "lm+cl" or bool(cfg.init_from),
    )


def shared_tokenizer(cfg: TrainConfig, tok_dir: Path, master: bool, ddp: bool) -> GurTokenizer:
    """The run's tokenizer: built (or loaded) by rank 0 into `tok_dir`, then loaded from there by the others."""
    if master:
        tok = build_tokenizer(cfg, tok_dir)
    if ddp:
        dist.barrier()
    if not master:
        tok = load_tokenizer(tok_dir)
    return tok


def gur_model_config(cfg: TrainConfig, tok: GurTokenizer):
    """The model's settings: the run's preset and options, the tokenizer's vocabulary and special ids."""
    return preset_config(
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


def heldout_batches(cfg: TrainConfig, dcfg: DataConfig, tok: GurTokenizer, rank: int) -> list:
    """The in-loop evaluation's batches: held-out pairs per bucket, each batch of distinct documents."""
    return in_loop_batches(
        cfg,
        rank,
        lambda: [
            collate(b, tok, dcfg.seq_len(bucket), None)
            for bucket, pairs in heldout_pairs(dcfg, cfg.eval_pairs).items()
            for b in distinct_doc_batches(pairs, cfg.eval_batch)
        ],
    )


def print_heldout(cfg: TrainConfig, eval_batches: list) -> None:
    """The held-out batches' line, and why accuracy is missing when there are none."""
    print(f"held-out: {len(eval_batches)} batches of {cfg.eval_batch} pairs (chance {1 / cfg.eval_batch:.3f})")
    if not eval_batches:  # a batch needs eval_batch held-out documents: say why accuracy is missing
        print(
            f"held-out: warning: fewer than {cfg.eval_batch} held-out documents have pairs; no held-out accuracy. "
            "Raise heldout_fraction or lower eval_batch (small corpora: 0.2 and 16)."
        )
