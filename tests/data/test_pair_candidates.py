"""The gram index finds exactly the brute-force pairs; the caps select the same pairs as a plain reference."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.pair.automaton import new_workspace
from tasks.pair.candidates import (
    COUNTERS,
    PairConfig,
    SentenceArrays,
    _kernel_args,
    _qualifying_table,
    _select_table,
    qualifying_pairs,
    select_pairs,
)
from tests.helpers.pair_reference import reference_qualifying, reference_select

Doc = tuple[str, list[tuple[int, bool, str]]]

ALPHABETS = ("ab cd,.中文字", "aab  ,中中文", "the cat sat on a mat ", "中文字的是在了，。一二三")


def random_docs(rng: random.Random, n_docs: int = 4, max_sents: int = 12, max_len: int = 30) -> list[Doc]:
    alphabet = rng.choice(ALPHABETS)
    docs = []
    for d in range(n_docs):
        n = rng.randint(1, max_sents)
        sents = []
        for s in range(n):
            text = "".join(rng.choices(alphabet, k=rng.randint(0, max_len)))
            if rng.random() < 0.1 and sents:
                text = rng.choice(sents)[2]  # identical sentences happen
            sents.append((s * 3 + rng.randint(0, 2), s == 0 and rng.random() < 0.6, text))
        docs.append((f"doc-{d}", sents))
    return docs


def random_config(rng: random.Random, rule: str) -> PairConfig:
    hi = rng.choice([3, 6, 12, 30])
    if rule == "letters":
        k = rng.choice([2, 3, 5])
        return PairConfig(
            rule=rule,
            letters_k=k,
            letters_k_short=rng.randint(1, k),
            letters_k_by_length=rng.random() < 0.7,
            short_chars=rng.choice([5, 12, 25]),
            repeat=rng.choice([1, 2, 3]),
            title_quota=rng.choice([0, 1, 3]),
            doc_cap_factor=rng.choice([1, 2]),
            seed=rng.randint(0, 2**64 - 1),
            stop_gram_limit=None,
        )
    return PairConfig(
        rule=rule,
        min_weight=hi,
        min_weight_small=rng.randint(1, hi),
        small_weight=rng.choice([5, 20, 60]),
        repeat=rng.choice([1, 2, 3]),
        title_quota=rng.choice([0, 1, 3]),
        doc_cap_factor=rng.choice([1, 2]),
        seed=rng.randint(0, 2**64 - 1),
        stop_gram_limit=None,
    )


def norms_of(docs: list[Doc]) -> list[str]:
    return [s[2] for _, sents in docs for s in sents]


@pytest.mark.parametrize("rule", ["weighted", "letters"])
def test_index_finds_exactly_the_brute_force_pairs(rule: str) -> None:
    rng = random.Random(rule)
    for _ in range(80):
        docs = random_docs(rng)
        arrays, config = SentenceArrays.from_documents(docs), random_config(rng, rule)
        found, stop = qualifying_pairs(arrays, config)
        assert stop == 0
        np.testing.assert_array_equal(found, reference_qualifying(norms_of(docs), arrays, config))


@pytest.mark.parametrize("rule", ["weighted", "letters", "none"])
def test_selection_equals_reference(rule: str) -> None:
    """Same pairs, same order, same common substrings and same drop counts as the plain version."""
    rng = random.Random(f"select-{rule}")
    for _ in range(60):
        docs = random_docs(rng)
        arrays, config = SentenceArrays.from_documents(docs), random_config(rng, rule)
        fast, slow = select_pairs(arrays, config), reference_select(norms_of(docs), arrays, config)
        assert fast.rows() == slow.rows()
        assert fast.counts == slow.counts
        assert fast.counts["below_threshold"] == 0


def test_gram_hash_collisions_are_resolved_by_content() -> None:
    """With hash base 1 a gram's hash is the sum of its code points, so anagrams collide; still exact."""
    rng = random.Random("collide")
    collisions = 0
    for _ in range(40):
        docs = random_docs(rng)
        arrays, config = SentenceArrays.from_documents(docs), random_config(rng, "weighted")
        weak = _kernel_args(arrays, config, hash_base=1)
        found = np.unique(_qualifying_table(*weak)[0], axis=0)
        np.testing.assert_array_equal(found, qualifying_pairs(arrays, config)[0])
        tail = (
            config.rule == "none",
            config.repeat,
            config.title_quota,
            config.doc_cap_factor,
            np.uint64(config.seed),
        )
        a, b, t, m, counts = _select_table(*weak, *tail, new_workspace(arrays.max_len))
        strong = select_pairs(arrays, config)
        assert (a.tolist(), b.tolist(), m.tolist()) == (
            strong.a_row.tolist(),
            strong.b_row.tolist(),
            strong.match.tolist(),
        )
        assert dict(zip(COUNTERS, counts.tolist(), strict=True)) == strong.counts
        collisions += len(found) > 0
    assert collisions > 20


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    st.lists(st.text(alphabet="ab 中文,", max_size=20), min_size=1, max_size=10),
    st.sampled_from(["weighted", "letters"]),
    st.integers(1, 25),
    st.integers(1, 25),
)
def test_index_equals_brute_force_hypothesis(texts: list[str], rule: str, t1: int, t2: int) -> None:
    hi, lo = max(t1, t2), min(t1, t2)
    config = (
        PairConfig(rule=rule, min_weight=hi, min_weight_small=lo, small_weight=15, stop_gram_limit=None)
        if rule == "weighted"
        else PairConfig(rule=rule, letters_k=hi, letters_k_short=lo, short_chars=8, stop_gram_limit=None)
    )
    docs = [("d", [(i, i == 0, t) for i, t in enumerate(texts)])]
    arrays = SentenceArrays.from_documents(docs)
    np.testing.assert_array_equal(qualifying_pairs(arrays, config)[0], reference_qualifying(texts, arrays, config))


def paper_docs() -> list[Doc]:
    sents = ["spike is chasing tom.", "spike is chasing jerry.", "tom is chasing jerry.", "jerry is chasing tom."]
    return [("tom-and-jerry", [(i, False, t) for i, t in enumerate(sents)])]


def test_paper_example_letters_rule() -> None:
    arrays = SentenceArrays.from_documents(paper_docs())
    found = {
        tuple(p)
        for p in qualifying_pairs(arrays, PairConfig(rule="letters", letters_k=10, letters_k_by_length=False))[0]
    }
    assert (0, 1) in found  # "spike is chasing": 14 letters
    assert (2, 3) not in found  # " is chasing ": 9 letters


def test_paper_example_weighted_rule() -> None:
    arrays = SentenceArrays.from_documents(paper_docs())
    found = {tuple(p) for p in qualifying_pairs(arrays, PairConfig())[0]}
    assert {(0, 1), (2, 3)} <= found  # " is chasing " weighs 30


def test_small_sentence_threshold() -> None:
    # "中文" weighs 20: enough only when a sentence weighs <= small_weight.
    docs = [("d", [(0, False, "中文"), (1, False, "中文" + "x" * 50), (2, False, "y" * 50 + "中文")])]
    arrays = SentenceArrays.from_documents(docs)
    assert qualifying_pairs(arrays, PairConfig())[0].tolist() == [[0, 1], [0, 2]]
    assert qualifying_pairs(arrays, PairConfig(small_weight=19))[0].tolist() == []


def caps_hold(sel, arrays: SentenceArrays, config: PairConfig) -> None:
    uses = Counter(sel.a_row.tolist()) + Counter(sel.b_row.tolist())
    for row, count in uses.items():
        assert count <= (config.title_quota if arrays.is_title[row] else config.repeat)
    pairs = [tuple(sorted(p)) for p in zip(sel.a_row.tolist(), sel.b_row.tolist(), strict=True)]
    assert len(pairs) == len(set(pairs))
    doc_of = np.searchsorted(arrays.doc_bounds, sel.a_row, side="right") - 1
    assert (doc_of == np.searchsorted(arrays.doc_bounds, sel.b_row, side="right") - 1).all()
    sizes = np.diff(arrays.doc_bounds)
    for d, count in Counter(doc_of.tolist()).items():
        assert count <= config.doc_cap_factor * sizes[d]
    assert not (arrays.is_title[sel.a_row] & arrays.is_title[sel.b_row]).any()
    assert (sel.is_title_pair == arrays.is_title[sel.a_row]).all()


@pytest.mark.parametrize("rule", ["weighted", "letters", "none"])
def test_caps(rule: str) -> None:
    rng = random.Random(f"caps-{rule}")
    for _ in range(30):
        docs = random_docs(rng, n_docs=3, max_sents=40)
        arrays, config = SentenceArrays.from_documents(docs), random_config(rng, rule)
        caps_hold(select_pairs(arrays, config), arrays, config)


def test_none_rule_pairs_at_random_within_caps() -> None:
    docs = [("d", [(i, i == 0, f"sentence number {i}") for i in range(101)])]
    arrays = SentenceArrays.from_documents(docs)
    config = PairConfig(rule="none", repeat=2, title_quota=3)
    sel = select_pairs(arrays, config)
    caps_hold(sel, arrays, config)
    assert int(sel.is_title_pair.sum()) == 3
    assert len(sel.a_row) >= 90  # about repeat * n / 2, minus what the title took
    other = select_pairs(arrays, PairConfig(rule="none", repeat=2, title_quota=3, seed=1))
    assert other.rows() != sel.rows()


def test_doc_cap() -> None:
    docs = [("d", [(i, False, "abcdefghij" + str(i)) for i in range(10)])]  # every pair qualifies
    arrays = SentenceArrays.from_documents(docs)
    sel = select_pairs(arrays, PairConfig(repeat=9, doc_cap_factor=1))
    assert len(sel.a_row) == 10
    assert sel.counts["doc_cap"] == 1


def test_identical_sentences_are_not_paired() -> None:
    docs = [("d", [(0, False, "the same sentence"), (1, False, "the same sentence")])]
    sel = select_pairs(SentenceArrays.from_documents(docs), PairConfig())
    assert len(sel.a_row) == 0
    assert sel.counts["identical"] == 2  # passed over at each sentence's turn
    assert sel.counts["docs_without_pairs"] == 1


def test_stop_grams_are_counted_approximation() -> None:
    common = "shared boilerplate phrase "
    docs = [("d", [(i, False, common + f"tail {i}") for i in range(6)])]
    arrays = SentenceArrays.from_documents(docs)
    exact, stop = qualifying_pairs(arrays, PairConfig(stop_gram_limit=None))
    assert stop == 0 and len(exact) == 15
    limited, stop = qualifying_pairs(arrays, PairConfig(stop_gram_limit=5))
    assert stop > 0 and len(limited) == 0
    sel = select_pairs(arrays, PairConfig(stop_gram_limit=5))
    assert sel.counts["stop_grams"] == stop and len(sel.a_row) == 0


def test_deterministic_and_seeded() -> None:
    docs = random_docs(random.Random(3), n_docs=3, max_sents=40)
    arrays = SentenceArrays.from_documents(docs)
    a = select_pairs(arrays, PairConfig(seed=5, min_weight=6, min_weight_small=3))
    b = select_pairs(arrays, PairConfig(seed=5, min_weight=6, min_weight_small=3))
    c = select_pairs(arrays, PairConfig(seed=6, min_weight=6, min_weight_small=3))
    assert a.rows() == b.rows() and a.counts == b.counts
    assert a.rows() != c.rows()


def test_a_document_decides_its_own_pairs() -> None:
    """Random choices hang on (seed, doc_id, sent_id): a document's pairs don't depend on its neighbours."""
    docs = random_docs(random.Random(4), n_docs=3, max_sents=30)
    config = PairConfig(min_weight=6, min_weight_small=3)
    alone = select_pairs(SentenceArrays.from_documents(docs[1:2]), config)
    together = select_pairs(SentenceArrays.from_documents(docs), config)
    offset = len(docs[0][1])
    in_doc1 = (together.a_row >= offset) & (together.a_row < offset + len(docs[1][1]))
    assert (together.a_row[in_doc1] - offset).tolist() == alone.a_row.tolist()
    assert (together.b_row[in_doc1] - offset).tolist() == alone.b_row.tolist()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rule": "lcs"},
        {"min_weight": 10, "min_weight_small": 20},
        {"rule": "letters", "letters_k": 2, "letters_k_short": 3},
        {"min_weight_small": 0},
        {"repeat": -1},
        {"stop_gram_limit": 0},
    ],
)
def test_config_validation(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        PairConfig(**kwargs)


def test_thresholds() -> None:
    assert PairConfig().thresholds() == (30, 20)
    assert PairConfig(rule="letters").thresholds() == (3, 2)
    assert PairConfig(rule="letters", letters_k_by_length=False).thresholds() == (3, 3)
