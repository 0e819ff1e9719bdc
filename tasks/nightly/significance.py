"""Is a candidate's gain over the champion larger than its noise? A paired test over per-query scores.

Both models answer the same queries, so the evidence is the per-query difference
`d = candidate - champion`:

- gain = mean(d);
- interval: the percentile bootstrap interval of mean(d) at `confidence` (two-sided), resampling
  queries with replacement;
- p_value: one-sided paired permutation (sign-flip) test of "the candidate is no better": the share
  of random sign assignments of `d` whose mean is at least the observed one. With at most
  `resamples` assignments in all (2**n, n = queries with d != 0) they are enumerated exactly;
  otherwise `resamples` random ones are drawn and p = (1 + count) / (1 + resamples).

Pure numpy and seeded: the same scores give the same answer on every machine.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

CHUNK = 1_000_000  # numbers drawn at once (resamples x queries), to bound memory


@dataclass(frozen=True)
class PairedTest:
    n: int  # queries
    gain: float  # mean(candidate - champion)
    low: float  # bootstrap interval of the gain at `confidence`
    high: float
    p_value: float  # one-sided: P(mean >= gain | no difference)
    confidence: float


def paired_test(
    candidate: np.ndarray, champion: np.ndarray, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> PairedTest:
    """Gain, its bootstrap interval and a permutation p-value for paired per-query scores."""
    cand = np.asarray(candidate, dtype=np.float64)
    champ = np.asarray(champion, dtype=np.float64)
    if cand.shape != champ.shape or cand.ndim != 1 or len(cand) == 0:
        raise ValueError(f"need two non-empty 1-d arrays of one length, got {cand.shape} and {champ.shape}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    d = cand - champ
    n, gain = len(d), float(d.mean())
    rng = np.random.default_rng(seed)
    means = np.concatenate(
        [rng.choice(d, size=(rows, n), replace=True).mean(axis=1) for rows in _chunks(resamples, n)]
    )
    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return PairedTest(n, gain, float(low), float(high), _sign_flip_p(d, gain, resamples, rng), confidence)


def _chunks(total: int, width: int) -> list[int]:
    rows = max(1, CHUNK // max(width, 1))
    return [min(rows, total - start) for start in range(0, total, rows)]


def _sign_flip_p(d: np.ndarray, gain: float, resamples: int, rng: np.random.Generator) -> float:
    nonzero = d[d != 0]
    if len(nonzero) == 0:
        return 1.0  # no query differs: no evidence of a gain
    n = len(d)
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))  # float sums of the same values in another order
    if 2 ** len(nonzero) <= resamples:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=len(nonzero))))
        return float(np.mean(signs @ nonzero / n >= gain - tol))
    count = 0
    for rows in _chunks(resamples, len(nonzero)):
        signs = rng.choice(np.array([1.0, -1.0]), size=(rows, len(nonzero)))
        count += int(np.sum(signs @ nonzero / n >= gain - tol))
    return (1 + count) / (1 + resamples)
