"""An evaluation keeps each query's value (whose mean is the reported number), records the fingerprint of
the texts it scored, and counts how many of them the model trained on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from models.encoders import BM25Ranker  # noqa: E402
from samples.tiny_bert import tiny_bert  # noqa: E402
from tasks.evaluate.data import LabelledTexts  # noqa: E402
from tasks.evaluate.overlap import overlap, texts_fingerprint  # noqa: E402
from tasks.evaluate.scoring import question_retrieval  # noqa: E402
from tasks.evaluate.suite import DatasetSpec, SuiteConfig, run_unit  # noqa: E402

TITLES = [
    ("how to sort a list in python", "python"),
    ("python list sort by key", "python"),
    ("sort python dictionary by value", "python"),
    ("java string to int conversion", "java"),
    ("convert string to int in java", "java"),
    ("git undo last commit", "git"),
    ("git revert a pushed commit", "git"),
    ("undo git add before commit", "git"),
]


def labelled(rows=TITLES) -> LabelledTexts:
    names = sorted({t for _, t in rows})
    labels = np.array([names.index(t) for _, t in rows])
    return LabelledTexts("t", [q for q, _ in rows], labels, names)


def test_question_retrieval_keeps_each_querys_value():
    values = question_retrieval(BM25Ranker(), labelled())
    for v in values:
        assert list(v.queries) == list(range(len(TITLES)))  # every title has a same-tag neighbour
        assert v.per_query.shape == (len(TITLES),) and float(v.per_query.mean()) == pytest.approx(v.value)
    p1 = next(v for v in values if v.metric == "precision" and v.k == 1)
    assert set(p1.per_query) <= {0.0, 1.0}


def test_texts_fingerprint_follows_the_texts():
    a = texts_fingerprint(["x", "y"])
    assert a == texts_fingerprint(["x", "y"]) and a != texts_fingerprint(["y", "x"]) and len(a) == 16


def fake_train_run(root: Path, texts: list[str]) -> Path:
    """A keywords output holding `texts` and a `train` run on it whose export is a tiny BERT."""
    kw = root / "keywords" / "00000000000000aa"
    kw.mkdir(parents=True)
    pq.write_table(pa.table({"text": texts}), kw / "part-00000.parquet")
    run = root / "train" / "00000000000000bb"
    tiny_bert(run / "export", texts)
    ref = {"stage": "keywords", "fingerprint": "00000000000000aa", "path": "keywords/00000000000000aa"}
    (run / "_manifest.json").write_text(json.dumps({"stage": "train", "upstream": [ref], "inputs": {}}))
    return run / "export"


def test_a_unit_counts_the_texts_its_model_trained_on(tmp_path):
    suite = tmp_path / "suite.tsv"
    suite.write_text("id\ttitle\ttag\n" + "".join(f"{i}\t{q}\t{t}\n" for i, (q, t) in enumerate(TITLES)))
    trained_on = [q.upper() for q, _ in TITLES[:3]] + ["something else entirely"]  # case does not hide a text
    export = fake_train_run(tmp_path / "data", trained_on)
    assert overlap(str(export), [q for q, _ in TITLES]) == {
        "training_input": "keywords/00000000000000aa",
        "texts": 8,
        "overlap": 3,
    }
    result = run_unit(str(export), DatasetSpec("stackoverflow", str(suite)), SuiteConfig())
    assert result.overlap["overlap"] == 3 and "OVERLAP: 3 of 8 texts" in result.detail
    assert result.texts_fingerprint == texts_fingerprint([q for q, _ in TITLES])
    baseline = run_unit("bm25", DatasetSpec("stackoverflow", str(suite)), SuiteConfig())
    assert baseline.overlap["overlap"] is None and "OVERLAP" not in baseline.detail  # unknown, not zero


def test_a_text_of_fewer_than_four_words_is_no_overlap(tmp_path):
    # a heading that is also a training section's whole body, or a generated fragment many pages share, names
    # no document: it is not counted; a text of four words or more is
    export = fake_train_run(tmp_path / "data", ["Structs", "1.34.0 · source", "git undo last commit"])
    found = overlap(str(export), ["structs", "1.34.0 · SOURCE", "git undo last commit", "a held-out title here"])
    assert found == {"training_input": "keywords/00000000000000aa", "texts": 4, "overlap": 1}
