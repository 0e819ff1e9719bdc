from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.keywords.gsdmm import MovieGroupProcess, build_vocabulary

REPO = Path(__file__).resolve().parents[2]


def reference_score(model: MovieGroupProcess, doc: list[str]) -> list[float]:
    """Yin & Wang's Eq. 3 / Eq. 4 straight from the paper, in plain Python, from the public counts."""
    K, alpha, beta = model.K, model.alpha, model.beta  # noqa: N806
    V, D = model.vocab_size, model.number_docs  # noqa: N806
    m, n, nw = model.cluster_doc_count, model.cluster_word_count, model.cluster_word_distribution
    multiplicity: dict[str, int] = {}
    for w in doc:
        multiplicity[w] = multiplicity.get(w, 0) + 1
    if not model.repeated_tokens:
        multiplicity = dict.fromkeys(multiplicity, 1)
    length = sum(multiplicity.values())
    p = []
    for z in range(K):
        log_p = math.log(m[z] + alpha) - math.log(D - 1 + K * alpha)
        for w, count in multiplicity.items():
            for j in range(1, count + 1):
                log_p += math.log(nw[z].get(w, 0) + beta + j - 1)
        for i in range(1, length + 1):
            log_p -= math.log(n[z] + V * beta + i - 1)
        p.append(math.exp(log_p))
    total = sum(p)
    return [x / total for x in p]


def random_corpus(seed: int, n_docs: int = 40, n_words: int = 25, max_len: int = 7) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    return [[f"w{x}" for x in rng.integers(0, n_words, size=rng.integers(1, max_len + 1))] for _ in range(n_docs)]


def toy_topics(n_topics: int = 7, docs_per_topic: int = 25, seed: int = 0) -> tuple[list[list[str]], list[int]]:
    """Well-separated topics: each has its own 8 words; a document draws 3-6 of them."""
    rng = np.random.default_rng(seed)
    docs, truth = [], []
    for d in range(n_topics * docs_per_topic):
        t = d % n_topics
        words = rng.choice(8, size=rng.integers(3, 7), replace=False)
        docs.append([f"t{t}_{w}" for w in words])
        truth.append(t)
    return docs, truth


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), repeated=st.booleans(), k=st.integers(1, 6))
def test_score_equals_paper_formula(seed: int, repeated: bool, k: int) -> None:
    docs = random_corpus(seed)
    model = MovieGroupProcess(K=k, alpha=0.1, beta=0.1, n_iters=3, random_state=seed, repeated_tokens=repeated)
    model.fit(docs)
    probes = docs[:5] + [["w1", "w1", "w2", "unseen"], ["unseen"], []]
    for doc in probes:
        np.testing.assert_allclose(model.score(doc), reference_score(model, doc), rtol=0, atol=1e-12)


def test_same_seed_same_labels_and_backends_agree() -> None:
    docs = random_corpus(7, n_docs=300, n_words=60)
    runs = {
        (backend, repeated): MovieGroupProcess(
            K=12, n_iters=8, random_state=3, backend=backend, repeated_tokens=repeated
        )
        for backend in ("numba", "numpy")
        for repeated in (False, True)
    }
    labels = {key: model.fit(docs) for key, model in runs.items()}
    for repeated in (False, True):
        assert labels["numba", repeated] == labels["numpy", repeated]
        assert runs["numba", repeated].history_ == runs["numpy", repeated].history_
        assert runs["numba", repeated].cluster_word_distribution == runs["numpy", repeated].cluster_word_distribution
    again = MovieGroupProcess(K=12, n_iters=8, random_state=3).fit(docs)
    assert again == labels["numba", False]
    other = MovieGroupProcess(K=12, n_iters=8, random_state=4).fit(docs)
    assert other != labels["numba", False]


def test_counts_are_consistent_with_labels() -> None:
    docs = random_corpus(1, n_docs=120)
    model = MovieGroupProcess(K=6, n_iters=5, random_state=0)
    labels = model.fit(docs)
    assert model.labels_ is not None and labels == model.labels_.tolist()
    assert model.cluster_doc_count == np.bincount(labels, minlength=6).tolist()
    for z in range(6):
        expected: dict[str, int] = {}
        for doc, label in zip(docs, labels, strict=True):
            if label == z:
                for w in dict.fromkeys(doc):
                    expected[w] = expected.get(w, 0) + 1
        assert model.cluster_word_distribution[z] == dict(
            sorted(expected.items(), key=lambda kv: model.vocabulary[kv[0]])
        )
        assert model.cluster_word_count[z] == sum(expected.values())
    assert [h["iteration"] for h in model.history_] == [1, 2, 3, 4, 5]
    assert model.history_[-1]["populated"] == sum(m > 0 for m in model.cluster_doc_count)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_recovers_seven_separated_topics(backend: str) -> None:
    docs, truth = toy_topics()
    model = MovieGroupProcess(K=12, alpha=0.1, beta=0.1, n_iters=30, random_state=0, backend=backend)
    labels = model.fit(docs)
    pairs = set(zip(truth, labels, strict=True))
    assert len(pairs) == 7 and len({z for _, z in pairs}) == 7  # a bijection between topics and clusters
    assert model.history_[-1] == {"iteration": 30, "moved": 0, "populated": 7}
    for t, z in pairs:
        assert all(w.startswith(f"t{t}_") for w in model.top_words(z, 8))
    assert model.predict(docs).tolist() == labels


def test_long_document_scores_without_underflow() -> None:
    docs, _ = toy_topics()
    model = MovieGroupProcess(K=12, n_iters=10, random_state=0)
    model.fit(docs, vocab_size=5000)
    long_doc = [f"t3_{i % 8}" for i in range(8)] + [f"rare{i}" for i in range(192)]  # 200 distinct tokens
    log_p = model._log_scores(long_doc)
    assert np.exp(log_p).max() == 0.0  # the package's unshifted exp would give an all-zero vector here
    p = np.array(model.score(long_doc))
    assert np.all(np.isfinite(p)) and p.sum() == pytest.approx(1.0)
    assert model.choose_best_label(long_doc)[0] == model.predict([docs[3]])[0]
    long_corpus = docs + [long_doc, [f"rare{i}" for i in range(200)]]
    labels = MovieGroupProcess(K=12, n_iters=5, random_state=0).fit(long_corpus, vocab_size=5000)
    assert len(labels) == len(long_corpus)


def test_vocabulary_in_first_occurrence_order() -> None:
    assert build_vocabulary([["b", "a", "b"], [], ["c", "a"]]) == {"b": 0, "a": 1, "c": 2}


def test_labels_do_not_depend_on_hash_seed() -> None:
    script = (
        "import json; from tasks.keywords.gsdmm import MovieGroupProcess;"
        "from tests.keywords.test_gsdmm import random_corpus;"
        "print(json.dumps(MovieGroupProcess(K=5, n_iters=4, backend='numpy').fit(random_corpus(3, n_docs=60))))"
    )
    outputs = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        result = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        outputs.add(result.stdout)
    assert len(outputs) == 1


def test_save_load_and_from_data_round_trip(tmp_path: Path) -> None:
    docs = random_corpus(5)
    model = MovieGroupProcess(K=4, n_iters=4, random_state=1, repeated_tokens=True)
    model.fit(docs)
    path = tmp_path / "model.json"
    model.save(path)
    json.loads(path.read_text())  # plain JSON
    loaded = MovieGroupProcess.load(path)
    assert loaded.to_dict() == model.to_dict()
    rebuilt = MovieGroupProcess.from_data(
        K=model.K,
        alpha=model.alpha,
        beta=model.beta,
        D=model.number_docs,
        vocab_size=model.vocab_size,
        cluster_doc_count=model.cluster_doc_count,
        cluster_word_count=model.cluster_word_count,
        cluster_word_distribution=model.cluster_word_distribution,
        repeated_tokens=True,
    )
    for doc in docs[:5] + [["unseen", "w1"]]:
        assert loaded.score(doc) == model.score(doc)
        np.testing.assert_allclose(rebuilt.score(doc), model.score(doc), rtol=0, atol=1e-15)


def test_rejects_strings_and_small_vocab_size() -> None:
    model = MovieGroupProcess(K=2, n_iters=1)
    with pytest.raises(TypeError):
        model.fit(["not tokenized"])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        model.fit([["a", "b"]], vocab_size=1)
    model.fit([["a", "b"], ["c"]])
    with pytest.raises(TypeError):
        model.score("exception")
