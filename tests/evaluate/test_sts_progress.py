"""A supervised STS unit says how far it is: step, loss and ETA while it trains, pairs while it predicts."""

from __future__ import annotations

import logging
import re

import numpy as np

import storage.progress
from models.sts.train import StsTrainConfig
from samples.tiny_bert import tiny_bert
from tasks.sts.data import StsPairs
from tasks.sts.families import parse_family, run_family

PAIRS = [
    ("a man plays a guitar", "a man is playing a guitar", 4.8),
    ("a woman slices an onion", "a woman is cutting an onion", 4.6),
    ("a dog runs on the grass", "a cat sleeps on a sofa", 0.8),
    ("kids play football", "children are playing soccer", 4.2),
    ("a man eats bread", "a plane takes off", 0.0),
    ("the sun is shining", "it is a sunny day", 3.9),
]


def pairs(rows) -> StsPairs:
    a, b, score = zip(*rows, strict=True)
    return StsPairs("inline", list(a), list(b), np.array(score))


def test_siamese_training_logs_step_loss_and_eta(tmp_path, monkeypatch, caplog):
    """S-BERT (the family that trained 9.5 minutes in silence) on a tiny BERT: a line per step here
    (`LOG_EVERY_S` = 0; 10 s in use), each with the step count, the loss and, before the last, an ETA."""
    monkeypatch.setattr(storage.progress, "LOG_EVERY_S", 0.0)
    folder = tiny_bert(tmp_path / "bert", [t for a, b, _ in PAIRS for t in (a, b)])
    family = parse_family(f"siamese:{folder}")
    config = StsTrainConfig(batch_size=2, epochs=2, seed=0)  # 3 batches an epoch: 6 steps
    train, dev = pairs(PAIRS), pairs(PAIRS[:4])
    with caplog.at_level(logging.INFO, logger="models.sts.train"):
        result = run_family(family, "en", config, train, {"dev": dev}, folder, {})
    messages = [r.getMessage() for r in caplog.records if r.name == "models.sts.train"]
    steps = [m for m in messages if m.startswith("sts train: ") and ", loss=" in m]
    beats = [m for m in messages if m.startswith("sts train: ") and ", loss=" not in m]  # a step slower than 1 s
    assert all(re.fullmatch(r"sts train: \d/6 steps \(.* in(, ETA ([\dmhs]+|\?))?\)", m) for m in beats), beats
    assert len(result.log) == 6 and len(steps) >= 6, messages
    line = re.compile(r"sts train: (\d)/6 steps \(\d+%, [\d.]+/s, [\dmhs]+ in(, ETA [\dmhs]+)?\), loss=(\d+\.\d{4})")
    parsed = [line.match(m) for m in steps]
    assert all(parsed), steps
    assert [int(m.group(1)) for m in parsed[:6]] == [1, 2, 3, 4, 5, 6]
    assert all(m.group(2) for m in parsed[:5]) and not parsed[5].group(2)  # an ETA until the last step
    assert [float(m.group(3)) for m in parsed[:6]] == [round(r["loss"], 4) for r in result.log]
    predicted = [m for m in messages if m.startswith("sts predict dev: ")]
    assert predicted and predicted[-1].startswith("sts predict dev: 4/4 pairs (100%")


def test_word2vec_logs_epochs(monkeypatch, caplog):
    """The w2v families' vectors (~30 s on the demo corpus) report each epoch here (`LOG_EVERY_S` = 0)."""
    from models.word2vec import Word2VecConfig, train_word2vec

    monkeypatch.setattr(storage.progress, "LOG_EVERY_S", 0.0)
    with caplog.at_level(logging.INFO, logger="models.word2vec"):
        train_word2vec([a.split() for a, _, _ in PAIRS], Word2VecConfig(min_count=1, epochs=3))
    lines = [r.getMessage() for r in caplog.records if r.name == "models.word2vec"]
    assert [line.split(" (")[0] for line in lines[:3]] == [f"word2vec: {i}/3 epochs" for i in (1, 2, 3)]
    assert "ETA" in lines[0] and lines[-1].endswith(", words=21")
