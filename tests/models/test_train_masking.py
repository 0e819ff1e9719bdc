"""Span corruption: hump-geometric lengths, 15% masked, sentinel/label layout, collate shapes."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from models.gur.pair_data import collate, label_len  # noqa: E402
from models.gur.span_masking import corrupt, hump_geometric, num_to_mask, plan_spans, sample_span_lengths  # noqa: E402
from models.gur.tokenizer import train_wordpiece  # noqa: E402

SENTINELS = list(range(1000, 1100))
EOS = 1


def test_hump_geometric_is_normalised_with_mean_3_8():
    p = hump_geometric()
    # p^|k-3| for k=1..10 = .4356 .66 1 .66 .4356 .2875 .1897 .1252 .0827 .0546; sum 3.93 -> P(3) = .254
    assert p.sum() == pytest.approx(1.0)
    assert p.argmax() == 2 and p[2] == pytest.approx(0.2544, abs=1e-3)
    assert (np.arange(1, 11) * p).sum() == pytest.approx(3.795, abs=0.005)


def test_sampled_span_lengths_follow_the_distribution():
    draws = sample_span_lengths(np.random.default_rng(0), 40_000)
    freq = np.bincount(draws, minlength=11)[1:] / len(draws)
    assert np.abs(freq - hump_geometric()).max() < 0.01  # 3 sigma of a binomial at n=40k is < 0.007
    assert draws.mean() == pytest.approx(3.795, abs=0.05)


def test_masked_fraction_is_15_percent_on_long_inputs():
    rng = np.random.default_rng(1)
    masked = total = 0
    for n in rng.integers(100, 200, size=200):
        spans = plan_spans(int(n), rng)
        masked += sum(length for _, length in spans)
        total += n
    assert masked / total == pytest.approx(0.15, abs=0.003)
    assert num_to_mask(200) == 30 and num_to_mask(1) == 0 and num_to_mask(3) == 1


def test_spans_do_not_touch_or_overlap_and_respect_the_max_length():
    rng = np.random.default_rng(2)
    for n in [2, 3, 5, 8, 13, 30, 64, 126]:
        for _ in range(50):
            spans = plan_spans(n, rng)
            assert sum(length for _, length in spans) == num_to_mask(n)
            ends = [s + length for s, length in spans]
            assert all(s >= 0 for s, _ in spans) and all(e <= n for e in ends)
            assert all(nxt > end for (nxt, _), end in zip(spans[1:], ends, strict=False)), spans  # >= 1 kept between
            if n > 20:
                assert all(length <= 10 for _, length in spans)


def test_sentinel_and_label_layout_reconstructs_the_sentence():
    rng = np.random.default_rng(3)
    ids = list(range(10, 50))  # 40 tokens -> 6 masked
    source, target = corrupt(ids, SENTINELS, EOS, rng)
    assert target[-1] == EOS
    used = [t for t in source if t in SENTINELS]
    assert used == SENTINELS[: len(used)] and [t for t in target if t in SENTINELS] == used  # in order, both sides
    # refill: each sentinel in the source is replaced by the tokens after it in the target
    spans, cur = {}, None
    for t in target[:-1]:
        if t in SENTINELS:
            cur = t
            spans[cur] = []
        else:
            spans[cur].append(t)
    rebuilt = [x for t in source for x in (spans[t] if t in SENTINELS else [t])]
    assert rebuilt == ids
    assert len(source) == len(ids) - 6 + len(used)


def test_collate_pads_labels_with_minus_100_and_wraps_inputs():
    tok = train_wordpiece(["the cat sat on the mat", "a dog ran far away in the park"] * 20, vocab_size=200)
    long_text = " ".join(["the cat sat on the mat"] * 20)  # > 32 tokens: randomly cropped
    pairs = [("d1", "the cat sat on the mat", long_text), ("d2", "a dog ran", "far away in the park")]
    batch = collate(pairs, tok, 32, np.random.default_rng(0), fixed_shape=True)
    ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
    assert ids.shape == (4, 32) and labels.shape == (4, label_len(32))
    assert (ids[:, 0] == tok.cls_id).all()
    lengths = mask.sum(1)
    assert 24 <= lengths[2].item() < 32  # cropped to 30 tokens, then spans -> one sentinel each
    for row, n in zip(ids, lengths, strict=True):
        assert row[n - 1] == tok.eos_id and (row[n:] == tok.pad_id).all()
    for row in labels:
        real = row[row != -100]
        assert real[0].item() in tok.sentinel_ids and real[-1].item() == tok.eos_id
        assert (row[len(real) :] == -100).all()
    plain = collate(pairs, tok, 32, None)
    assert (plain["labels"] == -100).all()
    assert plain["attention_mask"][2].sum().item() == 32  # [CLS] + 30 tokens + EOS
    short = collate(pairs[1:], tok, 32, np.random.default_rng(0))  # padded to the longest row, a multiple of 8
    assert short["input_ids"].shape[1] == 8 and short["labels"].shape[1] == 8
    assert (
        tok.hf.decode(plain["input_ids"][0][plain["attention_mask"][0].bool()]) == "[CLS] the cat sat on the mat </s>"
    )


def test_clean_views_are_the_same_crops_unmasked():
    tok = train_wordpiece(["the cat sat on the mat", "a dog ran far away in the park"] * 20, vocab_size=200)
    long_text = " ".join(["the cat sat on the mat"] * 20)
    pairs = [("d1", "the cat sat on the mat", long_text), ("d2", "a dog ran", "far away in the park")]
    batch = collate(pairs, tok, 32, np.random.default_rng(0), clean_views=True)
    clean, masked = batch["cl_input_ids"], batch["input_ids"]
    assert clean.shape[0] == masked.shape[0] == 4 and batch["cl_attention_mask"][2].sum() == 32
    for i in range(4):
        c = clean[i][batch["cl_attention_mask"][i].bool()].tolist()
        m = masked[i][batch["attention_mask"][i].bool()].tolist()
        assert not set(c) & set(tok.sentinel_ids) and set(m) & set(tok.sentinel_ids)
        kept = iter(c)
        assert all(t in kept for t in m if t not in tok.sentinel_ids)  # masked minus sentinels: a subsequence of clean
        hidden = [t for t in batch["labels"][i].tolist() if t != -100 and t not in tok.sentinel_ids][:-1]  # drop EOS
        assert len(c) == len([t for t in m if t not in tok.sentinel_ids]) + len(hidden)
