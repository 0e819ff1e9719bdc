from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tasks.keywords.coherence import (
    normalized_mutual_info,
    plot_sweep,
    summarize_sweep,
    sweep_k,
    topic_coherence,
)

# N = 4 documents; D(a) = 3, D(b) = 3, D(c) = 2, D(a, b) = 2, D(a, c) = 1, D(b, c) = 1.
DOCS = [["a", "b"], ["a", "c", "a"], ["b", "c"], ["a", "b", "d"]]
EPS = 1e-12


def test_two_word_topic_by_hand() -> None:
    values = topic_coherence([["a", "b"]], DOCS)
    # UMass: log((P(a,b) + eps) / P(a)) = log(0.5 / 0.75) = log(2/3)
    assert values["umass"][0] == pytest.approx(math.log(2 / 3), abs=1e-11)
    # NPMI(a, b) = log(0.5 / (0.75 * 0.75)) / -log(0.5) = log(8/9) / log(2) = -0.169925...
    x = math.log(8 / 9) / math.log(2)
    assert values["npmi"][0] == pytest.approx(x, abs=1e-11)
    # C_V: NPMI(a, a) = log(0.75 / 0.5625) / -log(0.75) = 1, so v(a) = (1, x), v(b) = (x, 1), their sum is
    # (1 + x, 1 + x) and cos(v(a), sum) = (1 + x) / (sqrt(1 + x^2) * sqrt(2)) = 0.578657..., the same for b.
    assert values["c_v"][0] == pytest.approx((1 + x) / (math.sqrt(1 + x * x) * math.sqrt(2)), abs=1e-11)


def test_three_word_topic_by_hand() -> None:
    values = topic_coherence([["a", "b", "c"], ["c"]], DOCS)
    # UMass pairs (later | earlier): (b|a) = log(.5/.75), (c|a) = log(.25/.75), (c|b) = log(.25/.75)
    expected = (math.log(2 / 3) + 2 * math.log(1 / 3)) / 3
    assert values["umass"][0] == pytest.approx(expected, abs=1e-11)
    # NPMI(a, c) = log(0.25 / (0.75 * 0.5)) / -log(0.25) = log(2/3) / log(4), same for (b, c); mean of 6 ordered
    # pairs = mean of the 3 unordered ones.
    ab = math.log(8 / 9) / math.log(2)
    ac = math.log(2 / 3) / math.log(4)
    assert values["npmi"][0] == pytest.approx((ab + 2 * ac) / 3, abs=1e-11)
    assert math.isnan(values["umass"][1]) and math.isnan(values["npmi"][1]) and math.isnan(values["c_v"][1])


def test_pairs_that_never_cooccur_stay_finite() -> None:
    values = topic_coherence([["c", "d"]], DOCS)
    # P(c, d) = 0: NPMI = log(eps / (0.5 * 0.25)) / -log(eps), close to -1
    assert values["npmi"][0] == pytest.approx(math.log(EPS / 0.125) / -math.log(EPS), abs=1e-11)
    assert values["umass"][0] == pytest.approx(math.log(EPS / 0.5), abs=1e-9)


def test_rejects_words_missing_from_corpus() -> None:
    with pytest.raises(ValueError, match="missing"):
        topic_coherence([["a", "zzz"]], DOCS)


def test_matches_gensim_on_short_texts() -> None:
    gensim_models = pytest.importorskip("gensim.models.coherencemodel")
    from gensim.corpora import Dictionary

    rng = np.random.default_rng(0)
    docs = [[f"w{x}" for x in rng.choice(30, size=rng.integers(2, 8), replace=False)] for _ in range(200)]
    topics = [[f"w{x}" for x in rng.choice(30, size=6, replace=False)] for _ in range(4)]
    mine = topic_coherence(topics, docs)
    dictionary = Dictionary(docs)
    for measure, name in (("u_mass", "umass"), ("c_npmi", "npmi"), ("c_v", "c_v")):
        model = gensim_models.CoherenceModel(
            topics=topics,
            texts=docs,
            corpus=[dictionary.doc2bow(d) for d in docs],
            dictionary=dictionary,
            coherence=measure,
            processes=1,
        )
        np.testing.assert_allclose(mine[name], model.get_coherence_per_topic(), rtol=0, atol=1e-9)


def test_nmi_by_hand() -> None:
    assert normalized_mutual_info([0, 0, 1, 1], [5, 5, 7, 7]) == pytest.approx(1.0)
    assert normalized_mutual_info([0, 1, 0, 1], [0, 0, 1, 1]) == pytest.approx(0.0)
    assert normalized_mutual_info([0, 0, 0], [1, 1, 1]) == 1.0
    # U = (0,0,1,1), V = (0,0,0,1): H(U) = log 2, H(V) = -(3/4 log 3/4 + 1/4 log 1/4),
    # I = 1/2 log((1/2) / (1/2 * 3/4)) + 1/4 log((1/4) / (1/2 * 3/4)) + 1/4 log((1/4) / (1/2 * 1/4))
    h_u = math.log(2)
    h_v = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    mi = 0.5 * math.log(4 / 3) + 0.25 * math.log(2 / 3) + 0.25 * math.log(2)
    assert normalized_mutual_info([0, 0, 1, 1], [0, 0, 0, 1]) == pytest.approx(2 * mi / (h_u + h_v), abs=1e-12)


def test_sweep_summary_and_plot(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    docs = [[f"t{d % 4}_{w}" for w in rng.choice(6, size=4, replace=False)] for d in range(80)]
    rows = sweep_k(docs, None, ks=[2, 4, 8], seeds=[0, 1, 2], n_iters=15)
    assert [(r["k"], r["seed"]) for r in rows] == [(k, s) for k in (2, 4, 8) for s in (0, 1, 2)]
    assert all(r["populated"] <= r["k"] and r["scored"] <= r["populated"] for r in rows)
    assert rows == sweep_k(docs, None, ks=[2, 4, 8], seeds=[0, 1, 2], n_iters=15, backend="numpy")
    summary, best = summarize_sweep(rows)
    assert [e["k"] for e in summary] == [2, 4, 8]
    means = {e["k"]: e["npmi_mean"] for e in summary}
    assert means[best] == max(means.values())
    assert means[4] == pytest.approx(np.mean([r["npmi"] for r in rows if r["k"] == 4]))
    path = plot_sweep(rows, tmp_path / "sweep" / "coherence.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summary_ties_go_to_smaller_k() -> None:
    rows = [
        {"k": k, "seed": 0, "populated": k, "scored": k, "umass": -1.0, "npmi": 0.1, "c_v": 0.5} for k in (10, 5, 20)
    ]
    assert summarize_sweep(rows)[1] == 5
