"""Metric conventions on a hand-checked five-query fixture, equality with ranx and SciPy, exact search."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.evaluate import metrics as M
from tasks.evaluate.search import dense_score_blocks, exact_search, full_rankings


def _hits(*hit_ranks: tuple[int, ...], depth: int = 12) -> np.ndarray:
    out = np.zeros((len(hit_ranks), depth), dtype=bool)
    for q, ranks in enumerate(hit_ranks):
        out[q, [r - 1 for r in ranks]] = True
    return out


# Five queries, twelve ranked results each (1-based hit ranks) and the size of each relevant set.
HITS = _hits((1,), (2, 4), (), (1, 2, 3, 12), (11,))
N_REL = np.array([1, 2, 3, 5, 1])


def test_precision_at_k():
    # P@1: 1, 0, 0, 1, 0 -> 2/5
    assert M.precision_at_k(HITS, 1).mean() == pytest.approx(0.4)
    # P@5: 1/5, 2/5, 0, 3/5, 0 -> 1.2/5
    assert M.precision_at_k(HITS, 5).mean() == pytest.approx(0.24)
    # P@10: .1, .2, 0, .3, 0 -> .6/5
    assert M.precision_at_k(HITS, 10).mean() == pytest.approx(0.12)
    # k beyond the returned results still divides by k
    assert M.precision_at_k(HITS[:1, :3], 5)[0] == pytest.approx(0.2)


def test_recall_at_k():
    # recall@5: 1/1, 2/2, 0/3, 3/5, 0/1 -> 2.6/5
    assert M.recall_at_k(HITS, N_REL, 5).mean() == pytest.approx(0.52)
    # recall@12: 1, 1, 0, 4/5, 1 -> 3.8/5
    assert M.recall_at_k(HITS, N_REL, 12).mean() == pytest.approx(0.76)


def test_mrr():
    # MRR@10: 1, 1/2, 0, 1, 0 (first hit at 11 is outside) -> 2.5/5
    assert M.mrr_at_k(HITS, 10).mean() == pytest.approx(0.5)
    # full ranking: query 5 adds 1/11
    assert M.mrr_at_k(HITS).mean() == pytest.approx((2.5 + 1 / 11) / 5)


def test_average_precision_divides_by_min_k_and_relevant():
    # AP@10: q1 1/1; q2 (1/2 + 2/4)/2; q3 0; q4 (1+1+1)/min(10,5); q5 0 -> (1 + .5 + 0 + .6 + 0)/5
    assert M.average_precision_at_k(HITS, N_REL, 10).mean() == pytest.approx(0.42)
    # AP@3: q1 1; q2 (1/2)/min(3,2); q4 3/min(3,5) = 1 (ranx/TREC would give 3/5) -> (1 + .25 + 1)/5
    assert M.average_precision_at_k(HITS, N_REL, 3).mean() == pytest.approx(0.45)
    # full AP: q4 (1+1+1+4/12)/5, q5 (1/11)/1
    expected = (1 + 0.5 + 0 + (3 + 4 / 12) / 5 + 1 / 11) / 5
    assert M.average_precision_at_k(HITS, N_REL).mean() == pytest.approx(expected)


def test_queries_without_relevant_items_are_refused():
    with pytest.raises(ValueError, match="at least one relevant"):
        M.recall_at_k(HITS, np.array([1, 2, 0, 5, 1]), 5)
    with pytest.raises(ValueError, match="more hits"):
        M.average_precision_at_k(HITS, np.array([1, 1, 3, 5, 1]))


def test_hits_from_relevant():
    indices = np.array([[3, 1, 2], [0, 5, 4]])
    assert M.hits_from_relevant(indices, [{1, 9}, set()]).tolist() == [[False, True, False], [False] * 3]


# ranx's metrics, run as plain Python in a child process: NUMBA_DISABLE_JIT must be set before numba is
# imported, and JIT-compiling ranx's kernels costs a minute on a cold cache for 40 small rankings.
RANX_SCRIPT = """
import json, sys
import numpy as np
import ranx

given = json.load(sys.stdin)
scores, relevant, depth = np.array(given["scores"]), given["relevant"], given["depth"]
n_queries, n_docs = scores.shape
order = np.argsort(-scores, axis=1)
qrels = ranx.Qrels.from_dict({f"q{q:03d}": {f"d{d:03d}": 1 for d in rel} for q, rel in enumerate(relevant)})
run = ranx.Run.from_dict(
    {f"q{q:03d}": {f"d{d:03d}": float(scores[q, d]) for d in order[q, :depth]} for q in range(n_queries)}
)
full_run = ranx.Run.from_dict(
    {f"q{q:03d}": {f"d{d:03d}": float(scores[q, d]) for d in range(n_docs)} for q in range(n_queries)}
)
names = ["precision@1", "precision@5", "precision@10", "recall@100", "mrr@10", "map@10", "map@100"]
out = {k: v.tolist() for k, v in ranx.evaluate(qrels, run, names, return_mean=False).items()}
out["map"] = ranx.evaluate(qrels, full_run, "map", return_mean=False).tolist()
out["mrr"] = ranx.evaluate(qrels, full_run, "mrr", return_mean=False).tolist()
json.dump(out, sys.stdout)
"""


def test_equal_to_ranx_on_random_rankings():
    import importlib.util
    import json
    import os
    import subprocess
    import sys

    if importlib.util.find_spec("ranx") is None:
        pytest.skip("ranx is not installed")
    rng = np.random.default_rng(7)
    n_queries, n_docs, depth = 40, 150, 100
    scores = rng.random((n_queries, n_docs))
    relevant = [set(rng.choice(n_docs, size=rng.integers(1, 30), replace=False).tolist()) for _ in range(n_queries)]
    order = np.argsort(-scores, axis=1)
    child = subprocess.run(
        [sys.executable, "-c", RANX_SCRIPT],
        input=json.dumps({"scores": scores.tolist(), "relevant": [sorted(r) for r in relevant], "depth": depth}),
        env={**os.environ, "NUMBA_DISABLE_JIT": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    theirs = {k: np.array(v) for k, v in json.loads(child.stdout).items()}

    hits = M.hits_from_relevant(order[:, :depth], relevant)
    full_hits = M.hits_from_relevant(order, relevant)
    n_rel = np.array([len(r) for r in relevant])
    for k in (1, 5, 10):
        np.testing.assert_allclose(M.precision_at_k(hits, k), theirs[f"precision@{k}"])
    np.testing.assert_allclose(M.recall_at_k(hits, n_rel, 100), theirs["recall@100"])
    np.testing.assert_allclose(M.mrr_at_k(hits, 10), theirs["mrr@10"])
    np.testing.assert_allclose(M.mrr_at_k(full_hits), theirs["mrr"])
    np.testing.assert_allclose(M.average_precision_at_k(full_hits, n_rel), theirs["map"])
    # ranx's AP@k divides by |relevant|, ours by min(k, |relevant|): rescale to compare.
    for k in (10, 100):
        rescaled = theirs[f"map@{k}"] * n_rel / np.minimum(k, n_rel)
        np.testing.assert_allclose(M.average_precision_at_k(hits, n_rel, k), rescaled)


def test_correlations_match_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    x = rng.normal(size=300)
    y = 0.5 * x + rng.normal(size=300)
    y_ties = np.round(y * 2) / 2  # gold scores in half steps, like STS-B: many ties
    assert M.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0])
    assert M.spearman(x, y_ties) == pytest.approx(stats.spearmanr(x, y_ties)[0])
    assert M.rankdata(y_ties).tolist() == stats.rankdata(y_ties).tolist()
    assert np.isnan(M.pearson(np.ones(5), np.arange(5.0)))


def test_accuracy_and_macro_f1():
    y_true = np.array([0, 0, 1, 1, 2, 2])
    y_pred = np.array([0, 1, 1, 1, -1, 2])
    # accuracy: 4 of 6 right (-1 = no label is a miss)
    assert M.accuracy(y_true, y_pred) == pytest.approx(4 / 6)
    # F1: label 0 tp1 fp0 fn1 -> 2/3; label 1 tp2 fp1 fn0 -> 4/5; label 2 tp1 fp0 fn1 -> 2/3
    assert M.macro_f1(y_true, y_pred, 3) == pytest.approx((2 / 3 + 4 / 5 + 2 / 3) / 3)
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    assert M.macro_f1(y_true, y_pred, 3) == pytest.approx(
        sklearn_metrics.f1_score(y_true, y_pred, labels=[0, 1, 2], average="macro", zero_division=0)
    )


def test_exact_search_matches_brute_force_across_doc_chunks():
    rng = np.random.default_rng(0)
    queries = rng.normal(size=(37, 16)).astype(np.float32)
    docs = rng.normal(size=(501, 16)).astype(np.float32)
    full = queries @ docs.T
    scores, indices = exact_search(queries, docs, k=20, query_chunk=8, doc_chunk=64)
    expected = np.argsort(-full, axis=1)[:, :20]
    np.testing.assert_array_equal(indices, expected)
    np.testing.assert_allclose(scores, np.take_along_axis(full, expected, axis=1), rtol=1e-5)
    assert exact_search(queries, docs[:5], k=20)[1].shape == (37, 5)


def test_full_rankings_exclude_the_query_and_keep_ties_in_order():
    emb = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0]], dtype=np.float32)
    rows = np.array([0, 2])
    ranked = np.concatenate([o for _, o in full_rankings(dense_score_blocks(emb[rows], emb, block=1), exclude=rows)])
    # query 0 ties with docs 1 and 3 (score 1) -> doc order; itself dropped
    assert ranked.tolist() == [[1, 3, 2], [0, 1, 3]]
