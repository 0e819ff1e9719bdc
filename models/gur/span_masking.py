"""T5-style span corruption with hump-geometric span lengths (GUR, SpanBERT-like mean 3.8).

A sentence of token ids becomes an encoder input where each masked span is replaced by one
sentinel (`<extra_id_0>`, `<extra_id_1>`, ... left to right) and a target that lists each
sentinel followed by the tokens it hides, closed by EOS:

    tokens  a b c d e f g h          spans [c d] and [g]
    source  a b <0> e f <1> h
    target  <0> c d <1> g </s>

Span lengths k in 1..10 follow P(k) proportional to p^|k - mode| (p=0.66, mode=3); the total
masked count is round(ratio * n), so the masked fraction is exact up to rounding. Spans never
touch each other (at least one kept token between two spans), so each sentinel marks one span.
"""

from __future__ import annotations

import numpy as np

MASK_RATIO = 0.15
HUMP_P = 0.66
HUMP_MODE = 3
MIN_SPAN = 1
MAX_SPAN = 10


def hump_geometric(
    p: float = HUMP_P, mode: int = HUMP_MODE, lower: int = MIN_SPAN, upper: int = MAX_SPAN
) -> np.ndarray:
    """P(k) for k = lower..upper (index 0 is k=lower), normalised: p^|k-mode| / sum."""
    weights = np.array([p ** abs(k - mode) for k in range(lower, upper + 1)], dtype=np.float64)
    return weights / weights.sum()


SPAN_PROBS = hump_geometric()
SPAN_LENGTHS = np.arange(MIN_SPAN, MAX_SPAN + 1)


def sample_span_lengths(rng: np.random.Generator, size: int) -> np.ndarray:
    """`size` independent draws from the hump-geometric distribution (int64 array)."""
    return rng.choice(SPAN_LENGTHS, size=size, p=SPAN_PROBS)


def num_to_mask(n: int, ratio: float = MASK_RATIO) -> int:
    """Masked tokens for a sentence of `n` tokens: round(ratio * n), at least 1 when n >= 2, else 0."""
    if n < 2:
        return 0
    return max(1, int(ratio * n + 0.5))


def plan_spans(n: int, rng: np.random.Generator, ratio: float = MASK_RATIO) -> list[tuple[int, int]]:
    """Non-touching masked spans [(start, length), ...] sorted by start for a sentence of `n` tokens."""
    total = num_to_mask(n, ratio)
    if total == 0:
        return []
    lengths: list[int] = []
    left = total
    while left > 0:
        k = int(sample_span_lengths(rng, 1)[0])
        lengths.append(min(k, left))  # the last span is cut to hit the exact total
        left -= lengths[-1]
    keep = n - total
    while len(lengths) > 1 and len(lengths) - 1 > keep:  # not enough kept tokens to separate spans: merge
        last = lengths.pop()
        lengths[-1] += last
    rng.shuffle(lengths)
    m = len(lengths)
    # Kept tokens go in m+1 gaps; inner gaps need >= 1 token. Spread the spare ones uniformly.
    spare = keep - (m - 1)
    cuts = np.sort(rng.integers(0, spare + 1, size=m))
    gaps = np.diff(np.concatenate([[0], cuts, [spare]]))  # (m+1,) sums to spare
    gaps[1:m] += 1
    spans = []
    pos = 0
    for i, length in enumerate(lengths):
        pos += int(gaps[i])
        spans.append((pos, int(length)))
        pos += int(length)
    return spans


def corrupt(
    ids: list[int], sentinels: list[int], eos_id: int, rng: np.random.Generator, ratio: float = MASK_RATIO
) -> tuple[list[int], list[int]]:
    """(source ids with sentinels, target ids `<s0> span0 <s1> span1 ... </s>`); no special tokens added to source."""
    spans = plan_spans(len(ids), rng, ratio)
    if len(spans) > len(sentinels):
        raise ValueError(f"{len(spans)} spans but only {len(sentinels)} sentinel tokens")
    source: list[int] = []
    target: list[int] = []
    pos = 0
    for j, (start, length) in enumerate(spans):
        source.extend(ids[pos:start])
        source.append(sentinels[j])
        target.append(sentinels[j])
        target.extend(ids[start : start + length])
        pos = start + length
    source.extend(ids[pos:])
    target.append(eos_id)
    return source, target


def max_target_len(max_tokens: int, ratio: float = MASK_RATIO) -> int:
    """Longest possible target for sentences of up to `max_tokens` tokens: 2 * masked + EOS (all 1-token spans)."""
    return 2 * num_to_mask(max_tokens, ratio) + 1
