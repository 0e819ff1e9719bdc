"""The gate's paired test: hand-computed cases, then the vectorised function against a slow obvious one."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tasks.nightly.significance import paired_test


def test_hand_computed_cases():
    # d = candidate - champion = [1, 1, 1, 0]: gain .75. Sign flips of the three non-zero differences:
    # 2**3 = 8 equally likely means; only (+, +, +) reaches .75, so p = 1/8 exactly.
    t = paired_test([1, 1, 1, 0], [0, 0, 0, 0], resamples=1000)
    assert (t.n, t.gain, t.p_value) == (4, 0.75, 0.125)
    # d = [0, 1]: a bootstrap mean is 0, .5 or 1 with chance 1/4, 1/2, 1/4; the 2.5% and 97.5% quantiles
    # of that distribution are 0 and 1, so the 95% interval is [0, 1].
    t = paired_test([0.5, 1.0], [0.5, 0.0], resamples=4000, seed=3)
    assert (t.low, t.high) == (0.0, 1.0) and t.p_value == 0.5  # flips: +1 -> mean .5 >= .5, -1 -> -.5
    # identical scores: no gain, no evidence
    t = paired_test([0.2, 0.4, 0.9], [0.2, 0.4, 0.9])
    assert (t.gain, t.low, t.high, t.p_value) == (0.0, 0.0, 0.0, 1.0)
    # a constant gain on every query is certain: the interval is the gain itself
    t = paired_test(np.full(30, 0.6), np.full(30, 0.5), resamples=2000)
    assert t.low == pytest.approx(0.1) and t.high == pytest.approx(0.1) and t.p_value < 0.001


def slow_test(cand, champ, confidence, resamples, seed):
    """The obvious loops: resample queries one bootstrap at a time; every sign assignment when few."""
    d = [c - h for c, h in zip(cand, champ, strict=True)]
    n, gain = len(d), sum(d) / len(d)
    rng = np.random.default_rng(seed + 1000)
    means = sorted(sum(d[rng.integers(n)] for _ in range(n)) / n for _ in range(resamples))
    nonzero = [x for x in d if x != 0]
    if len(nonzero) <= 12:
        flips = list(itertools.product((1, -1), repeat=len(nonzero)))
        p = sum(sum(s * x for s, x in zip(f, nonzero, strict=True)) / n >= gain - 1e-12 for f in flips) / len(flips)
    else:
        hits = sum(sum(x * rng.choice((1, -1)) for x in nonzero) / n >= gain - 1e-12 for _ in range(resamples))
        p = (1 + hits) / (1 + resamples)
    alpha = 1 - confidence
    return gain, np.quantile(means, alpha / 2), np.quantile(means, 1 - alpha / 2), p


@pytest.mark.parametrize("seed", range(6))
def test_agrees_with_the_slow_obvious_implementation(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 60))
    champ = rng.integers(0, 2, n).astype(float)  # P@1 per query is 0 or 1
    cand = np.where(rng.random(n) < 0.2, 1 - champ, champ)  # some queries flip
    if seed % 2:
        cand, champ = rng.random(n), rng.random(n)  # continuous scores (MAP, MRR)
    confidence = [0.9, 0.95, 0.99][seed % 3]
    fast = paired_test(cand, champ, confidence, resamples=4000, seed=seed)
    gain, low, high, p = slow_test(cand, champ, confidence, 4000, seed)
    spread = float(np.std(cand - champ)) / np.sqrt(n)  # the standard error of the gain
    assert fast.gain == pytest.approx(gain)
    assert fast.low == pytest.approx(low, abs=0.25 * spread + 1e-9)
    assert fast.high == pytest.approx(high, abs=0.25 * spread + 1e-9)
    exact = np.count_nonzero(cand - champ) <= 12
    assert fast.p_value == (pytest.approx(p) if exact else pytest.approx(p, abs=0.03))


def test_is_seeded_and_checks_its_input():
    rng = np.random.default_rng(0)
    a, b = rng.random(200), rng.random(200)
    assert paired_test(a, b, seed=7) == paired_test(a, b, seed=7)
    with pytest.raises(ValueError, match="one length"):
        paired_test([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="confidence"):
        paired_test([1.0], [0.0], confidence=95)
