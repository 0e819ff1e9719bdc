"""Small training runs on the demo pair shards, for the tests that train: `make_shards` writes the shards (30
documents, at most 20 pairs each; each test module that trains on them declares it as its module-scoped
`shards` fixture), `run_config` is a TrainConfig of eight steps on them with the given fields changed, and
`OPTIONS` are the train flow's options for a run of a few steps on them."""

from __future__ import annotations

from pathlib import Path

from models.training.loop import TrainConfig
from samples.train_shards import write_demo_shards


def make_shards(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("shards")
    write_demo_shards(out, max_docs=30, max_pairs_per_doc=20, row_group_rows=64)
    return out


def run_config(shards: Path, out: Path, **kw) -> TrainConfig:
    base = dict(
        out_dir=str(out),
        shards=str(shards),
        max_steps=8,
        vocab_size=500,
        tokenizer_sample=2000,
        short_batch=4,
        long_batch=4,
        shuffle_buffer=64,
        log_every=1,
        eval_every=4,
        eval_batch=4,
        heldout_fraction=0.2,
        ckpt_every=4,
        warmup_steps=2,
        lr=1e-3,
        threads=1,
    )
    return TrainConfig(**{**base, **kw})


OPTIONS = dict(
    vocab_size=500,
    tokenizer_sample=2000,
    short_batch=4,
    long_batch=4,
    shuffle_buffer=64,
    log_every=2,
    eval_every=3,
    eval_batch=4,
    heldout_fraction=0.2,
    ckpt_every=3,
    warmup_steps=2,
    threads=1,
)
