"""Batch order for question training: the topic-spread permutation and its place in the fingerprint."""

from __future__ import annotations

import dataclasses

import numpy as np

from models.tfcsg.question_data import spread_order
from storage.fingerprint import fingerprint
from tasks.train.task import LATER_FIELDS, RUNTIME_KEYS, TRAIN_CODE_VERSION, train_config, train_fingerprint


def _worst_window(topics: np.ndarray, order: np.ndarray, batch: int) -> int:
    """The most rows one topic has in any batch of `batch` consecutive rows of `order`."""
    seq = topics[order]
    return max(np.bincount(seq[i : i + batch]).max() for i in range(0, len(seq) - batch + 1, batch))


def test_spread_order_is_a_seeded_permutation_that_spreads_each_topic():
    rng = np.random.default_rng(7)
    topics = rng.integers(0, 20, 6400)  # 20 topics of about 320 rows, as StackOverflow's tags
    topics[:600] = 3  # and one large topic
    order = spread_order(topics, np.random.default_rng(0))
    assert sorted(order.tolist()) == list(range(len(topics)))
    assert np.array_equal(order, spread_order(topics, np.random.default_rng(0)))
    assert not np.array_equal(order, spread_order(topics, np.random.default_rng(1)))
    # In every batch of 64 each topic appears about 64 * n / N times (+-1 by construction, +-2 with
    # the jitter at window edges); a plain permutation clumps.
    share = np.bincount(topics) / len(topics)
    seq = topics[order]
    for start in range(0, len(seq) - 63, 64):
        counts = np.bincount(seq[start : start + 64], minlength=20)
        assert np.all(np.abs(counts - 64 * share) <= 2.5), (start, counts)
    plain = np.random.default_rng(0).permutation(len(topics))
    assert _worst_window(topics, order, 64) < _worst_window(topics, plain, 64)


def test_sampling_is_hashed_only_when_set():
    source = {"fingerprint": "abc"}
    default = train_fingerprint(source, {})
    # the formula before the field existed: every learning-relevant field, sampling not among them
    full = {k: v for k, v in dataclasses.asdict(train_config({})).items() if k not in RUNTIME_KEYS}
    for field in LATER_FIELDS:  # sampling and the fields added after it, all hashed only when set
        del full[field]
    assert default == fingerprint("train", TRAIN_CODE_VERSION, full, ["abc"])
    assert train_fingerprint(source, {"sampling": "random"}) == default
    assert train_fingerprint(source, {"sampling": "topic-spread"}) != default
