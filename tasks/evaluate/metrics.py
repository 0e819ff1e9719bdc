"""Evaluation metrics as pure functions over arrays.

Ranking metrics take `hits`, a boolean matrix (queries, ranks): `hits[q, r]` is true when the
result at rank `r + 1` of query `q` is relevant, and `n_relevant[q]`, the size of the query's
whole relevant set (retrieved or not). Each returns one value per query; callers average.
Conventions (those of sentence-transformers' `InformationRetrievalEvaluator`):

- P@k = hits in the top k / k (k, not the number of results, when fewer were returned);
- recall@k = hits in the top k / |relevant|;
- MRR@k = 1 / rank of the first hit when it is within k, else 0;
- AP@k = sum over hit ranks r <= k of P@r / min(k, |relevant|); with `k=None` the whole
  ranking counts and the denominator is |relevant| (TREC's AP over a full ranking).

Queries with no relevant item are the caller's to drop (and count): every metric here would
be undefined or trivially 0 for them, so they raise instead of silently skewing a mean.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _check(hits: np.ndarray, n_relevant: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    hits = np.asarray(hits, dtype=bool)
    if hits.ndim != 2:
        raise ValueError(f"hits must be (queries, ranks), got shape {hits.shape}")
    if n_relevant is None:
        return hits, None
    n_rel = np.asarray(n_relevant, dtype=np.float64)
    if n_rel.shape != (hits.shape[0],):
        raise ValueError(f"n_relevant must have one entry per query, got {n_rel.shape} for {hits.shape[0]} queries")
    if np.any(n_rel < 1):
        raise ValueError("every query needs at least one relevant item; drop the others before scoring")
    if np.any(hits.sum(axis=1) > n_rel):
        raise ValueError("a query has more hits than relevant items")
    return hits, n_rel


def precision_at_k(hits: np.ndarray, k: int) -> np.ndarray:
    """P@k per query: hits in the top k divided by k."""
    hits, _ = _check(hits)
    return hits[:, :k].sum(axis=1) / float(k)


def recall_at_k(hits: np.ndarray, n_relevant: np.ndarray, k: int) -> np.ndarray:
    """recall@k per query: hits in the top k divided by the size of the relevant set."""
    hits, n_rel = _check(hits, n_relevant)
    return hits[:, :k].sum(axis=1) / n_rel


def mrr_at_k(hits: np.ndarray, k: int | None = None) -> np.ndarray:
    """Reciprocal rank of the first hit within the top k (all ranks when `k` is None), else 0."""
    hits, _ = _check(hits)
    top = hits if k is None else hits[:, :k]
    any_hit = top.any(axis=1)
    first = top.argmax(axis=1)  # index of the first True (0 when there is none, masked below)
    return np.where(any_hit, 1.0 / (first + 1.0), 0.0)


def average_precision_at_k(hits: np.ndarray, n_relevant: np.ndarray, k: int | None = None) -> np.ndarray:
    """AP@k per query, divided by min(k, |relevant|); `k=None`: the full ranking, divided by |relevant|."""
    hits, n_rel = _check(hits, n_relevant)
    top = hits if k is None else hits[:, :k]
    ranks = np.arange(1, top.shape[1] + 1, dtype=np.float64)
    precision_at_hits = np.cumsum(top, axis=1) / ranks * top
    denominator = n_rel if k is None else np.minimum(float(k), n_rel)
    return precision_at_hits.sum(axis=1) / denominator


def hits_from_relevant(indices: np.ndarray, relevant: Sequence[set[int]]) -> np.ndarray:
    """Boolean hit matrix for ranked corpus `indices` (queries, ranks) and each query's relevant set."""
    indices = np.asarray(indices)
    out = np.zeros(indices.shape, dtype=bool)
    for q, rel in enumerate(relevant):
        if rel:
            out[q] = np.isin(indices[q], np.fromiter(rel, dtype=indices.dtype, count=len(rel)))
    return out


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson correlation; NaN when either side is constant (undefined, e.g. all-zero vectors)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise ValueError(f"need two 1-d arrays of the same length >= 2, got {x.shape} and {y.shape}")
    xc, yc = x - x.mean(), y - y.mean()
    denom = np.sqrt((xc * xc).sum() * (yc * yc).sum())
    return float((xc * yc).sum() / denom) if denom > 0 else float("nan")


def rankdata(x: np.ndarray) -> np.ndarray:
    """1-based ranks with ties given their average rank (SciPy's `rankdata(method="average")`)."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    # Start of each run of equal values, then the average of the 1-based positions in the run.
    starts = np.r_[True, sorted_x[1:] != sorted_x[:-1]]
    run_id = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    last = np.r_[first[1:], len(x)] - 1
    avg = (first + last) / 2.0 + 1.0
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = avg[run_id]
    return ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman correlation: Pearson of average ranks (ties share their mean rank)."""
    return pearson(rankdata(x), rankdata(y))


def accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Share of exact matches; a prediction of -1 (no label) is always wrong."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if y_true.shape != y_pred.shape or len(y_true) == 0:
        raise ValueError("need two non-empty arrays of the same shape")
    return float((y_true == y_pred).mean())


def macro_f1(y_true: np.ndarray, y_pred: np.ndarray, n_labels: int) -> float:
    """Unweighted mean over labels 0..n_labels-1 of per-label F1; a label never predicted and never
    true scores 0 (scikit-learn's `zero_division=0`), predictions of -1 only count as misses."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    scores = []
    for label in range(n_labels):
        tp = np.sum((y_pred == label) & (y_true == label))
        fp = np.sum((y_pred == label) & (y_true != label))
        fn = np.sum((y_pred != label) & (y_true == label))
        denom = 2 * tp + fp + fn
        scores.append(2 * tp / denom if denom else 0.0)
    return float(np.mean(scores))
