"""Pieces once written twice, now written once, give what each copy gave: the same learning rates at every
step, the same fingerprint inputs and the same word vectors."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest

from models.sts.train import StsTrainConfig
from models.training.config import TrainConfig
from models.training.schedule import get_lr


def old_train_loop_lr(step: int, cfg: TrainConfig) -> float:
    """`models/training/loop.py::get_lr` before the schedules were shared (verbatim)."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    if cfg.schedule == "constant":
        return 1.0
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps))
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def old_sts_lr(step: int, total: int, config: StsTrainConfig) -> float:
    """`models/sts/train.py::get_lr` before the schedules were shared (verbatim)."""
    warm = int(config.warmup * total)
    if step < warm:
        return config.lr * (step + 1) / warm
    if config.schedule == "linear":
        return config.lr * max(0.0, (total - step) / max(1, total - warm))
    return config.lr


@pytest.mark.parametrize(
    "max_steps, warmup_steps, schedule, min_lr_ratio",
    [
        (1000, 100, "constant", 0.1),  # the TrainConfig defaults
        (100, 10, "cosine", 0.1),
        (37, 0, "cosine", 0.0),  # no warmup
        (50, 50, "cosine", 0.2),  # warmup to the last step
        (10, 3, "constant", 0.1),
        (7, 10, "cosine", 0.3),  # warmup longer than the run
    ],
)
def test_train_loop_rates_are_unchanged(max_steps, warmup_steps, schedule, min_lr_ratio):
    cfg = TrainConfig(
        out_dir="",
        shards="",
        max_steps=max_steps,
        warmup_steps=warmup_steps,
        schedule=schedule,
        min_lr_ratio=min_lr_ratio,
    )
    for step in range(max_steps + 3):  # LambdaLR is asked once more after the last step; past the end too
        new = get_lr(step, cfg.max_steps, cfg.warmup_steps, cfg.schedule, min_ratio=cfg.min_lr_ratio)
        assert new == old_train_loop_lr(step, cfg), step  # the same float, not approximately


@pytest.mark.parametrize(
    "config, total",
    [
        (StsTrainConfig(), 180),  # constant 2e-5, no warmup
        (StsTrainConfig(lr=4e-5, warmup=0.1, schedule="linear"), 1078),  # the cpu preset's cross / siamese
        (StsTrainConfig(lr=2e-4, warmup=0.1, schedule="linear"), 94),  # llm-lora, 1,500 pairs of 16
        (StsTrainConfig(lr=1e-3, warmup=0.25, schedule="constant"), 9),
        (StsTrainConfig(lr=3e-5, warmup=1.0, schedule="linear"), 12),  # all warmup
        (StsTrainConfig(lr=3e-5, warmup=0.0, schedule="linear"), 1),
    ],
)
def test_sts_rates_are_unchanged(config, total):
    warmup = int(config.warmup * total)  # what `train_scorer` passes
    for step in range(total):
        assert get_lr(step, total, warmup, config.schedule, config.lr) == old_sts_lr(step, total, config), step


def test_unknown_schedule_is_an_error():
    with pytest.raises(ValueError, match="unknown learning-rate schedule 'cosin'"):
        get_lr(5, 10, 0, "cosin")


def test_sts_data_key_is_the_sha256_it_was(tmp_path):
    """The STS unit fingerprint hashes each data file's SHA-256 hex digest (once `content_signature` in
    `tasks/sts/families.py`, now `storage.fingerprint.file_sha256`): the same strings, so stored units stay valid."""
    from storage.fingerprint import content_signature, file_sha256
    from tasks.sts.families import parse_family
    from tasks.sts.task import StsFiles, unit_identity

    data = {"train": b"score,a,b\n4.2,a man plays,a man is playing\n", "dev": b"score,a,b\n1.0,x,y\n"}
    for name, content in data.items():
        (tmp_path / f"{name}.csv").write_bytes(content)
    files = StsFiles("en", str(tmp_path / "train.csv"), str(tmp_path / "dev.csv"))
    identity = unit_identity(parse_family("w2v-sg"), files, 0, "cpu", None, tmp_path)
    assert identity["data"] == {name: hashlib.sha256(content).hexdigest() for name, content in data.items()}
    (tmp_path / "abc").write_bytes(b"abc")  # FIPS 180-2's example
    assert file_sha256(tmp_path / "abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    # the stages' `content_signature` keeps its own meaning: (name, size, xxh3-128) per file
    assert content_signature(tmp_path / "dev.csv")[0][:2] == ["dev.csv", len(data["dev"])]


def test_word2vec_fingerprint_hashes_the_same_config_text(tmp_path):
    """`encoder_fingerprint` hashes the config through `json.dumps(default=str)`, so the dataclass's repr is
    what is hashed: moving `Word2VecConfig` to `models/word2vec.py` must keep that text."""
    from models.encoders import ENCODER_CODE_VERSION
    from storage.fingerprint import file_signature
    from tasks.evaluate.models import WORD2VEC, word2vec_fingerprint

    corpus = tmp_path / "corpus.tsv"
    corpus.write_text("title\na man plays\n", encoding="utf-8")
    old_text = "Word2VecConfig(vector_size=100, window=5, min_count=2, epochs=10, sg=1, seed=0)"
    assert str(WORD2VEC) == old_text
    payload = json.dumps((ENCODER_CODE_VERSION, "word2vec", old_text, "title", file_signature(corpus)), sort_keys=True)
    expected = hashlib.blake2b(payload.encode("utf-8"), digest_size=8).hexdigest()
    assert word2vec_fingerprint(corpus, "title", WORD2VEC) == expected


SENTENCES = [s.split() for s in ("a man plays a guitar", "a woman plays the piano", "a man is eating", "kids")] * 5


@pytest.mark.parametrize("sg", [0, 1])
def test_word2vec_gives_the_vectors_the_sts_copy_gave(sg):
    """The STS families' call (`sg`, min_count 1, the rest at their defaults) against the copy that
    `models/sts/wordvec.py` held, on the same sentences."""
    from gensim.models import Word2Vec

    from models.word2vec import Word2VecConfig, stable_hash, train_word2vec

    old = Word2Vec(
        SENTENCES, vector_size=100, window=5, min_count=1, sg=sg, epochs=10, seed=0, workers=1, hashfxn=stable_hash
    )
    vectors, vocab = train_word2vec(SENTENCES, Word2VecConfig(min_count=1, sg=sg))
    assert vocab == {w: i for i, w in enumerate(old.wv.index_to_key)}
    assert np.array_equal(vectors, old.wv.vectors)
    assert stable_hash("man0") == int.from_bytes(hashlib.blake2b(b"man0", digest_size=8).digest(), "little")
