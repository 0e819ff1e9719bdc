"""The ladder check of `benchmarks/gate_ladder.py` on a small labelled corpus with bodies: the label-free
suite orders models like the labelled one and its gate refuses a collapsed candidate."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

from samples.tiny_bert import STACKOVERFLOW, titles
from tests.helpers.shared_data import require_shared

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from gate_ladder import SUITES, gate_decisions, kendall_tau, ordering, rst_sections, score  # noqa: E402


def grouped_questions(folder: Path, n_docs: int = 160, per_doc: int = 4) -> Path:
    """Real StackOverflow titles grouped by tag into documents: a title and a body of three other titles of
    its tag, labelled with the tag (a corpus with labels and bodies, from the data at hand)."""
    by_tag: dict[str, list[str]] = {}
    for row in titles(16_000):
        by_tag.setdefault(row["tag"], []).append(row["title"].strip())
    docs = []
    for tag, group in itertools.islice(itertools.cycle(sorted(by_tag.items())), n_docs):
        start = sum(d["tag"] == tag for d in docs) * per_doc
        first, *rest = group[start : start + per_doc]
        body = " ".join(t.rstrip("?.! ") + "." for t in rest)
        docs.append({"id": f"{tag}-{start}", "title": first, "text": body, "tag": tag})
    folder.mkdir()
    (folder / "questions.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return folder


def test_the_label_free_gate_refuses_a_collapsed_candidate_and_orders_models_like_the_labelled_suite(tmp_path):
    require_shared(STACKOVERFLOW)
    from tasks.nightly.holdout import HoldoutConfig, split_corpus

    corpus = grouped_questions(tmp_path / "corpus")
    fields = {"text_field": "text", "title_field": "title", "share": 0.3}
    labelled = split_corpus(corpus, HoldoutConfig(label_field="tag", **fields), tmp_path / "data")
    free = split_corpus(corpus, HoldoutConfig(label_field="", **fields), tmp_path / "data")
    assert (labelled.kind, free.kind) == ("labelled", "label-free")
    title, ict = free.beir
    suites = {
        SUITES[0]: ("stackoverflow", labelled.stackoverflow),
        SUITES[1]: ("beir", title),
        SUITES[2]: ("beir", ict),
    }
    # an untrained copy of MiniLM: random weights put every text at nearly one point (collapsed)
    models = {"MiniLM (start)": "minilm", "BM25": "bm25", "collapsed": "untrained:0"}
    table = score(models, suites, {})
    decisions = gate_decisions(table, "MiniLM (start)", list(SUITES))
    assert not decisions["collapsed"][SUITES[1]] and not decisions["collapsed"][SUITES[2]]
    assert not decisions["collapsed"][SUITES[0]]
    for name in SUITES:
        assert ordering(table, name)[-1] == "collapsed"
    assert kendall_tau(table, SUITES[0], SUITES[1]) > 0


def test_rst_sections_keep_headings_and_prose_and_drop_markup():
    page = """:mod:`os` --- Misc
==================

Intro with :func:`os.getcwd` and ``code``.

.. note::

   A directive body.

Files
-----

Read a file::

    open("x")

Then close it. See `the docs <https://x>`_.
"""
    assert rst_sections(page) == [
        ("os --- Misc", "Intro with os.getcwd and code."),
        ("Files", "Read a file: Then close it. See the docs."),
    ]
