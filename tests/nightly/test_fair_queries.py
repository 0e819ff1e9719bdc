"""The gate leaves out the queries whose texts the candidate trained on, and refuses only a suite that leaked or
one with too few queries left: one text the corpus repeats never refuses a night."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tasks.evaluate.data import LabelledTexts, RetrievalSet
from tasks.evaluate.overlap import normalize
from tasks.nightly.fair_queries import MAX_SHARED, Shared, shared_texts
from tasks.nightly.suite_files import MIN_QUERIES

NOTICE = "This page is part of the Example manual, licensed under CC BY 4.0."


def _suite(n: int) -> RetrievalSet:
    """n queries, each with its own document; query 2's text is the notice and document 5 is the notice."""
    queries = [f"how does feature {i} work here" for i in range(n)]
    docs = [f"feature {i} works by reading the configuration file first" for i in range(n)]
    queries[2], docs[5] = NOTICE, NOTICE
    return RetrievalSet("s", [f"q{i}" for i in range(n)], queries, [f"d{i}" for i in range(n)], docs,
                        [{i} for i in range(n)])  # fmt: skip


def test_a_query_whose_text_or_relevant_document_was_trained_on_is_left_out_and_named():
    trained = {normalize(NOTICE), normalize("Short one"), "an unrelated training text of some length"}
    shared = shared_texts(_suite(40), trained)
    assert shared.queries == {2, 5}  # its own text (2), its relevant document's (5)
    assert (shared.shared, shared.texts, shared.sample) == (1, 79, (normalize(NOTICE),))  # distinct texts
    assert shared.refusal(38) is None  # one repeated text of 79: judged on the other 38 queries


def test_short_texts_and_texts_not_trained_on_are_not_shared():
    suite = _suite(20)
    assert shared_texts(suite, {"how", normalize("Short one")}).queries == frozenset()
    questions = LabelledTexts(
        "q", ["Reset a git branch", NOTICE, "Undo a commit in git"], np.array([0, 1, 0]), ["a", "b"]
    )
    shared = shared_texts(questions, {normalize(NOTICE)})
    assert shared.queries == {1} and shared.shared == 1


def test_a_suite_that_leaked_or_too_few_queries_left_refuses_with_the_figures():
    leaked = Shared(shared=10, texts=100, queries=frozenset(range(10)))
    assert 10 > MAX_SHARED * 100
    assert "shares 10 of its 100 texts" in leaked.refusal(90) and "a suite that leaked" in leaked.refusal(90)
    few = Shared(shared=1, texts=100, queries=frozenset({0, 1}))
    assert f"2 queries share texts with the candidate's training input and {MIN_QUERIES - 1} are left" in (
        few.refusal(MIN_QUERIES - 1)
    )
    assert few.refusal(MIN_QUERIES) is None


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.slow
def test_a_corpus_whose_every_page_repeats_a_paragraph_is_judged_on_its_merits(tmp_path):
    """Every page ends with the same notice, and a few have it as a section of its own: the held-out pages' inverse
    cloze queries that drew the notice are texts the candidate trained on. The night, judged on the inverse cloze
    task, leaves those out and decides on the rest (it was refused for them, every night); the row says how many
    and which."""
    from flows.nightly_retrain import nightly_retrain
    from samples.tiny_bert import tiny_bert
    from samples.wiki_docs import wiki_documents, write_jsonl
    from tasks.nightly.holdout import held_out

    notice = next(n for n in NOTICES if not held_out(n, 0.4, 0))  # its own sections train: a shared text
    pages = wiki_documents(200, sentences=8)
    records = [{**p, "text": f"{p['text']} {notice}"} for p in pages]  # the notice ends every page
    licence = {"id": "licence", "title": "Licence", "text": notice}  # and is one section of its own
    records += [{**licence, "id": f"licence-{i}", "title": f"Licence of part {i}"} for i in range(5)]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_jsonl(corpus / "pages.jsonl", records)
    model = tiny_bert(tmp_path / "tiny-bert", [r["title"] + " " + r["text"] for r in records])
    config = tmp_path / "nightly.toml"
    config.write_text(
        f'[corpus]\npath = "{corpus}"\n\n[train]\nmethod = "documents"\ninit_from = "{model}"\nsteps = 120\n'
        "options = {eval_every = 0, threads = 1, lr = 3e-3, batch_size = 16, interpolate = 1.0, gur_share = 0.0}\n\n"
        '[evaluate]\nholdout = 0.4\nstsb = []\n\n[gate]\nprimary = "heldout-ict/retrieval/mrr@10"\nguards = {}\n',
        encoding="utf-8",
    )
    night = nightly_retrain(config_path=str(config), root=str(tmp_path / "data"))
    assert night["overlap_texts"] == 1 and json.loads(night["overlap_sample"]) == [normalize(notice)]
    assert night["overlap"] >= 1 and "left out: the candidate trained on their texts" in night["reason"]
    # decided by the paired test on the other queries (a random tiny model's inverse-cloze gain is within its
    # noise on a few dozen queries, so the verdict itself is not what this asserts); any shared text refused before
    assert night["decision"] in ("promoted", "refused") and night["queries"] >= MIN_QUERIES
    assert "interval" in night["reason"] and "shares" not in night["reason"], night["reason"]


NOTICES = [f"This page is part of the Example manual {v}, licensed under CC BY 4.0." for v in ("1", "2", "3", "4")]
