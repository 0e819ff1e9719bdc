"""A supervised STS unit says how far it is: step, loss and ETA while it trains, pairs while it predicts."""

from __future__ import annotations

import logging
import re

import numpy as np

import storage.progress
from models.sts_train import StsTrainConfig
from tasks.sts.data import StsPairs
from tasks.sts.families import parse_family, run_family
from tests.tiny_bert import tiny_bert

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
    with caplog.at_level(logging.INFO, logger="models.sts_train"):
        result = run_family(family, "en", config, train, {"dev": dev}, folder, {})
    messages = [r.getMessage() for r in caplog.records if r.name == "models.sts_train"]
    steps = [m for m in messages if m.startswith("sts train: ")]
    assert len(result.log) == 6 and len(steps) >= 6, messages
    line = re.compile(r"sts train: (\d)/6 steps \(\d+%, [\d.]+/s, \d+s in(, ETA \d+s)?\), loss=(\d+\.\d{4})")
    parsed = [line.match(m) for m in steps]
    assert all(parsed), steps
    assert [int(m.group(1)) for m in parsed[:6]] == [1, 2, 3, 4, 5, 6]
    assert all(m.group(2) for m in parsed[:5]) and not parsed[5].group(2)  # an ETA until the last step
    assert [float(m.group(3)) for m in parsed[:6]] == [round(r["loss"], 4) for r in result.log]
    predicted = [m for m in messages if m.startswith("sts predict dev: ")]
    assert predicted and predicted[-1].startswith("sts predict dev: 4/4 pairs (100%")
