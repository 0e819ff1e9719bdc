"""The gate's held-out suite: a seeded hash-based share of the corpus's labelled rows, disjoint from what
the candidate trains on, stable as the corpus grows; and `auto` picks only the measured recipe."""

from __future__ import annotations

import csv
import json

from models.training.presets import resolve_preset
from tasks.evaluate.data import load_stackoverflow
from tasks.nightly.holdout import HoldoutConfig, held_out, split_corpus

ROWS = [(str(i), f"question number {i} about {tag}", tag) for i, tag in enumerate(["git", "java", "sql"] * 40)]


def write_tsv(path, rows, header=("id", "title", "tag")):
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, delimiter="\t").writerows([header, *rows])
    return path


def titles(path):
    with open(path, encoding="utf-8", newline="") as f:
        return [r["title"] for r in csv.DictReader(f, delimiter="\t")]


def test_split_is_disjoint_seeded_and_readable_by_the_evaluation(tmp_path):
    corpus = write_tsv(tmp_path / "questions.tsv", ROWS)
    train, suite, counts = split_corpus(corpus, HoldoutConfig(share=0.25), tmp_path / "data")
    trained, scored = titles(train), load_stackoverflow(suite).texts
    assert not set(trained) & set(scored) and sorted(trained + scored) == sorted(r[1] for r in ROWS)
    assert counts == {"train": len(trained), "holdout": len(scored)} and 15 <= len(scored) <= 45
    assert all(held_out(t, 0.25, 0) for t in scored) and not any(held_out(t, 0.25, 0) for t in trained)
    assert train.name == "questions.tsv" and open(train).readline() == "id\ttitle\ttag\n"  # same format
    # cached by content; another seed holds out other rows
    assert split_corpus(corpus, HoldoutConfig(share=0.25), tmp_path / "data")[1] == suite
    other = load_stackoverflow(split_corpus(corpus, HoldoutConfig(share=0.25, seed=1), tmp_path / "data")[1])
    assert set(other.texts) != set(scored)


def test_a_text_stays_on_its_side_as_the_corpus_grows_and_case_does_not_move_it(tmp_path):
    (tmp_path / "c").mkdir()
    write_tsv(tmp_path / "c" / "a.tsv", ROWS[:60])
    train, first, _ = split_corpus(tmp_path / "c", HoldoutConfig(), tmp_path / "data")
    first_titles, first_train = titles(first), (train / "a.tsv").read_bytes()
    write_tsv(
        tmp_path / "c" / "b.tsv", [(i, t.upper(), g) for i, t, g in ROWS[60:]] + [("x", ROWS[0][1].upper(), "git")]
    )
    again, second, _ = split_corpus(tmp_path / "c", HoldoutConfig(), tmp_path / "data")
    assert set(first_titles) < set(titles(second))
    # The split is kept up to date in place: the same folder, and a file that did not change is not rewritten.
    assert again == train and (train / "a.tsv").read_bytes() == first_train
    (tmp_path / "c" / "a.tsv").unlink()  # a file that leaves the corpus leaves both sides
    split_corpus(tmp_path / "c", HoldoutConfig(), tmp_path / "data")
    assert not (train / "a.tsv").exists() and not set(first_titles) & set(titles(second))
    trained = {t.lower() for f in train.iterdir() for t in titles(f)}
    assert not trained & {t.lower() for t in titles(second)}


def test_a_corpus_without_labels_has_no_held_out_suite(tmp_path):
    corpus = write_tsv(tmp_path / "q.tsv", [r[:2] for r in ROWS], header=("id", "title"))
    assert split_corpus(corpus, HoldoutConfig(), tmp_path / "data") is None
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_text("".join(json.dumps({"id": i, "title": t, "tag": g}) + "\n" for i, t, g in ROWS))
    assert split_corpus(jsonl, HoldoutConfig(), tmp_path / "data") is not None


def test_auto_picks_only_the_measured_recipe():
    assert resolve_preset("auto", gpu=True) == "cpu" and resolve_preset("auto", gpu=False) == "cpu"
    assert resolve_preset("paper", gpu=False) == "paper"  # still there by name
