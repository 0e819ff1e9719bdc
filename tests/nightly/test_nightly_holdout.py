"""The gate's held-out suite: a seeded hash-based share of the corpus's records, read by ingest's readers in
every format and compression, disjoint from what the candidate trains on, stable as the corpus grows; a
label-free suite for an unlabeled corpus; and `auto` picks only the measured recipe."""

from __future__ import annotations

import bz2
import csv
import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from models.training.presets import resolve_preset
from samples.wiki_docs import wiki_documents
from tasks.evaluate.data import load_beir, load_stackoverflow
from tasks.ingest.readers import ReaderConfig, Record, read_corpus
from tasks.nightly.config import ICT_TASK, PAIR_TASK, TITLE_TASK
from tasks.nightly.holdout import HoldoutConfig, held_out, split_corpus
from tasks.nightly.label_free import label_free_tasks
from tasks.nightly.suite_files import suite_sample

ROWS = [(str(i), f"question number {i} about {tag}", tag) for i, tag in enumerate(["git", "java", "sql"] * 40)]
QUESTIONS = HoldoutConfig(text_field="title", title_field="")  # StackOverflow titles: the text is the title


def write_tsv(path, rows, header=("id", "title", "tag"), opener=open):
    with opener(path, "wt", encoding="utf-8", newline="") as f:
        csv.writer(f, delimiter="\t").writerows([header, *rows])
    return path


def titles(path):
    with open(path, encoding="utf-8", newline="") as f:
        return [r["title"] for r in csv.DictReader(f, delimiter="\t")]


def texts(path: Path) -> list[str]:
    """The texts of the training mirror (a JSONL file, or every JSONL file under a folder)."""
    files = [path] if path.is_file() else sorted(path.rglob("*.jsonl"))
    return [json.loads(line)["text"] for f in files for line in f.read_text(encoding="utf-8").splitlines()]


def suite_rows(split) -> set[tuple[str, str]]:
    with open(split.stackoverflow, encoding="utf-8", newline="") as f:
        return {(r["title"], r["tag"]) for r in csv.DictReader(f, delimiter="\t")}


def test_split_is_disjoint_seeded_and_readable_by_the_evaluation(tmp_path):
    corpus = write_tsv(tmp_path / "questions.tsv", ROWS)
    config = HoldoutConfig(share=0.25, text_field="title", title_field="")
    split = split_corpus(corpus, config, tmp_path / "data")
    trained, scored = texts(split.train), load_stackoverflow(split.stackoverflow).texts
    assert split.kind == "labelled" and split.primary == "stackoverflow-holdout/question_retrieval/precision@1"
    assert not set(trained) & set(scored) and sorted(trained + scored) == sorted(r[1] for r in ROWS)
    assert (split.counts["train"], split.counts["holdout"]) == (len(trained), len(scored)) and 15 <= len(scored) <= 45
    assert all(held_out(t, 0.25, 0) for t in scored) and not any(held_out(t, 0.25, 0) for t in trained)
    # the training side is the records ingest reads, as JSON Lines the data stages read with fixed fields
    first = json.loads(split.train.read_text(encoding="utf-8").splitlines()[0])
    assert split.train.name == "questions.tsv.jsonl" and set(first) == {"id", "title", "text"}
    # cached by content; another seed holds out other rows
    assert split_corpus(corpus, config, tmp_path / "data").stackoverflow == split.stackoverflow
    other = split_corpus(corpus, HoldoutConfig(share=0.25, seed=1, text_field="title", title_field=""), tmp_path / "d")
    assert set(load_stackoverflow(other.stackoverflow).texts) != set(scored)


def test_gur_du_names_the_corpus_a_split_was_made_from_not_its_fingerprint_folder(tmp_path):
    from tasks.retention.collect import shown_corpus

    folder = tmp_path / "questions"
    folder.mkdir()
    write_tsv(folder / "a.tsv", ROWS)
    file_split = split_corpus(write_tsv(tmp_path / "q.tsv", ROWS), QUESTIONS, tmp_path / "data")
    folder_split = split_corpus(folder, QUESTIONS, tmp_path / "data")
    assert shown_corpus(str(file_split.train)) == f"{(tmp_path / 'q.tsv').resolve()} (training share)"
    assert shown_corpus(str(folder_split.train)) == f"{folder.resolve()} (training share)"
    assert shown_corpus(str(folder)) == str(folder)  # a corpus of your own is named as it is
    (folder_split.train.parent / "_source.json").write_text("{", encoding="utf-8")  # damaged: the path, no error
    assert shown_corpus(str(folder_split.train)) == str(folder_split.train)


def test_a_text_stays_on_its_side_as_the_corpus_grows_and_case_does_not_move_it(tmp_path):
    (tmp_path / "c").mkdir()
    write_tsv(tmp_path / "c" / "a.tsv", ROWS[:60])
    split = split_corpus(tmp_path / "c", QUESTIONS, tmp_path / "data")
    train, first_titles = split.train, titles(split.stackoverflow)
    first_train = (train / "a.tsv.jsonl").read_bytes()
    write_tsv(
        tmp_path / "c" / "b.tsv", [(i, t.upper(), g) for i, t, g in ROWS[60:]] + [("x", ROWS[0][1].upper(), "git")]
    )
    again = split_corpus(tmp_path / "c", QUESTIONS, tmp_path / "data")
    second = titles(again.stackoverflow)
    assert set(first_titles) < set(second)
    # The split is kept up to date in place: the same folder, and only the new file is read.
    assert again.train == train and (train / "a.tsv.jsonl").read_bytes() == first_train
    assert again.counts["files_read"] == 1
    (tmp_path / "c" / "a.tsv").unlink()  # a file that leaves the corpus leaves both sides
    third = titles(split_corpus(tmp_path / "c", QUESTIONS, tmp_path / "data").stackoverflow)
    assert not (train / "a.tsv.jsonl").exists() and not set(first_titles) & set(third)
    trained = {t.lower() for t in texts(train)}
    assert not trained & {t.lower() for t in third}


def test_every_format_ingest_reads_is_split_as_each_file_alone_and_every_record_is_counted(tmp_path):
    """.tsv, .tsv.gz, .jsonl.bz2 and .parquet, all with `tag`: the suite is the union of each file's held-out
    rows read alone, and training rows + held-out rows + rejects = the records ingest's readers yield."""
    folder = tmp_path / "corpus"
    (folder / "sub").mkdir(parents=True)
    write_tsv(folder / "a.tsv", ROWS[:30] + [("bad", "a row with", "too", "many fields")])
    write_tsv(folder / "sub" / "b.tsv.gz", ROWS[30:60], opener=gzip.open)
    with bz2.open(folder / "c.jsonl.bz2", "wt", encoding="utf-8") as f:
        f.writelines(json.dumps({"id": i, "title": t, "tag": g}) + "\n" for i, t, g in ROWS[60:90])
        f.write("{not json\n")
    pq.write_table(pa.Table.from_pylist([{"id": i, "title": t, "tag": g} for i, t, g in ROWS[90:]]), folder / "d.pq")
    (folder / "d.pq").rename(folder / "d.parquet")
    split = split_corpus(folder, QUESTIONS, tmp_path / "data")
    assert split.kind == "labelled"
    alone = set()
    for path in (folder / "a.tsv", folder / "sub" / "b.tsv.gz", folder / "c.jsonl.bz2", folder / "d.parquet"):
        alone |= suite_rows(split_corpus(path, QUESTIONS, tmp_path / "alone"))
    assert suite_rows(split) == alone and len(alone) >= 10
    reader = ReaderConfig(text_field="title", title_field="")
    items = list(read_corpus(folder, reader))
    records = [i for i in items if isinstance(i, Record)]
    n = split.counts
    assert n["train"] + n["holdout"] + n["rejects"] == len(items) and n["rejects"] == 2
    assert sorted(texts(split.train) + load_stackoverflow(split.stackoverflow).texts) == sorted(
        r.text for r in records
    )
    assert (split.train / "sub" / "b.tsv.gz.jsonl").exists()  # sub-folders are mirrored


def test_a_truncated_gzip_file_is_one_reject_naming_it_and_the_rest_is_split(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_tsv(folder / "day1.tsv", ROWS[:60])
    whole = gzip.compress("".join("\t".join(r) + "\n" for r in [("id", "title", "tag"), *ROWS[60:]]).encode())
    (folder / "day2.tsv.gz").write_bytes(whole[: len(whole) // 2])
    split = split_corpus(folder, QUESTIONS, tmp_path / "data")
    rejects = [json.loads(line) for line in (split.train.parent / "rejects" / "day2.tsv.gz.jsonl").open()]
    assert [r["reason"] for r in rejects] == ["unreadable_file"] and "day2.tsv.gz" in rejects[0]["detail"]
    assert split.kind == "labelled" and split.counts["rejects"] == 1 and split.counts["holdout"] > 0


@pytest.fixture(scope="module")
def wiki(tmp_path_factory):
    return wiki_documents(80)


def test_an_unlabeled_corpus_gets_a_label_free_suite_that_training_never_sees(tmp_path, wiki):
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(json.dumps(d) + "\n" for d in wiki[:50]), encoding="utf-8")
    pq.write_table(pa.Table.from_pylist(wiki[50:]), folder / "b.parquet")
    config = HoldoutConfig(share=0.4, text_field="text", title_field="title")
    split = split_corpus(folder, config, tmp_path / "data")
    assert split.kind == "label-free" and [Path(p).name for p in split.beir] == [TITLE_TASK, ICT_TASK]
    assert split.primary == f"{TITLE_TASK}/retrieval/mrr@10" and split.name == f"label-free: {TITLE_TASK}, {ICT_TASK}"
    title, ict = (load_beir(p) for p in split.beir)
    held = [d for d in wiki if held_out(d["text"], 0.4, 0)]
    assert len(title.queries) == len({d["title"] for d in held}) >= 10 and len(ict.docs) == len(held)
    trained = texts(split.train)
    assert sorted(trained) == sorted(d["text"] for d in wiki if not held_out(d["text"], 0.4, 0))
    # no held-out document, nor any sentence an ICT query asks with, is in the training input
    from tasks.split.sentences import split_sentences

    assert not set(trained) & {d["text"] for d in held}
    assert not {s for text in trained for s in split_sentences(text)} & set(ict.queries)
    # a title query's answer is the body alone; an ICT query's target lacks the query's sentence
    for qi, query in enumerate(ict.queries):
        (target,) = ict.relevant[qi]
        assert query not in ict.docs[target]
    assert title.docs == [d["text"] for d in held]


def test_a_capped_suite_scores_a_stable_seeded_sample_and_the_rest_stays_held_out(tmp_path, wiki):
    """`[evaluate] suite_documents`: the suite is made of at most that many held-out records, the same sample on
    every call, displaced only by records that hash lower; the training side is that of an uncapped split."""
    rows = [{"text": f"record {i} " + d["text"], "title": d["title"]} for i, d in enumerate(wiki * 3)]
    sample = suite_sample(rows, 40, seed=0)
    assert len(sample) == 40 and sample == suite_sample(rows, 40, seed=0)
    assert [rows.index(r) for r in sample] == sorted(rows.index(r) for r in sample)  # in their order
    assert suite_sample(rows, 0, seed=0) == rows and suite_sample(rows[:30], 40, seed=0) == rows[:30]
    assert suite_sample(rows, 40, seed=1) != sample  # seeded
    grown = suite_sample(rows + [{"text": f"new record {i}", "title": ""} for i in range(20)], 40, seed=0)
    new = [r for r in grown if r["text"].startswith("new record")]
    assert len(set(map(str, sample)) - set(map(str, grown))) == len(new)  # only displaced by newcomers

    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(json.dumps(d) + "\n" for d in wiki), encoding="utf-8")
    config = HoldoutConfig(share=0.5, text_field="text", title_field="title")
    full = split_corpus(folder, config, tmp_path / "data", cap=0)
    capped = split_corpus(folder, config, tmp_path / "data", cap=12)
    assert capped.train == full.train and sorted(texts(capped.train)) == sorted(texts(full.train))
    assert full.counts["scored"] == full.counts["holdout"] > 12 and capped.counts["scored"] == 12
    title, ict = (load_beir(p) for p in capped.beir)
    held = [d for d in wiki if held_out(d["text"], 0.5, 0)]
    kept = suite_sample([{"text": d["text"]} for d in held], 12, seed=0)
    assert len(ict.docs) == 12 and sorted(title.docs) == sorted(d["text"] for d in kept)
    again = split_corpus(folder, config, tmp_path / "data", cap=12)
    assert load_beir(again.beir[0]).queries == title.queries  # the same sample night after night


def test_a_gur_night_also_scores_pair_retrieval_a_sentence_finding_its_lcs_partner(tmp_path, wiki):
    from tasks.pair.candidates import PairConfig
    from tasks.pair.table import pair_table
    from tasks.split.sentences import SplitConfig, split_documents

    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(json.dumps(d) + "\n" for d in wiki), encoding="utf-8")
    config = HoldoutConfig(share=0.5, text_field="text", title_field="title", pairs=True)
    split = split_corpus(folder, config, tmp_path / "data")
    assert [Path(p).name for p in split.beir] == [TITLE_TASK, ICT_TASK, PAIR_TASK]
    pairs = load_beir(split.beir[2])
    assert len(pairs.queries) >= 10 and not set(pairs.queries) & set(pairs.docs)  # a query never finds itself
    held = [d for d in wiki if held_out(d["text"], 0.5, 0)]
    ids = [f"d{i}" for i in range(len(held))]  # the ids seed the pair stage's choices, as pair_task names them
    sentences, _ = split_documents(ids, [d["title"] for d in held], [d["text"] for d in held], SplitConfig())
    mined = {(r["a"], r["b"]) for r in pair_table(sentences, PairConfig())[0].to_pylist() if r["kind"] == "content"}
    for qi, query in enumerate(pairs.queries):  # every target is the query's partner as the pair stage mines it
        assert all((query, pairs.docs[d]) in mined for d in pairs.relevant[qi])


def test_label_free_tasks_are_seeded_and_a_shared_title_makes_every_document_with_it_relevant():
    docs = [
        {"id": "1", "title": "Install", "text": "Run the installer now. Then restart the machine today."},
        {"id": "2", "title": "install", "text": "Use pip to install it. It needs Python three or later."},
        {"id": "3", "title": None, "text": "A single sentence without a title."},
    ]
    tasks = label_free_tasks(docs, seed=0)
    corpus, queries, qrels = tasks[TITLE_TASK]
    assert [q["text"] for q in queries] == ["Install"] and qrels == [("q0", "d0"), ("q0", "d1")]
    assert [d["text"] for d in corpus] == [d["text"] for d in docs]  # bodies only
    _, ict_queries, ict_qrels = tasks[ICT_TASK]
    assert len(ict_queries) == 2 and [d for _, d in ict_qrels] == ["d0", "d1"]  # one-sentence documents: none
    assert label_free_tasks(docs, seed=0) == tasks
    many = [
        {"id": str(i), "title": None, "text": " ".join(f"Sentence {j} of doc {i} here." for j in range(6))}
        for i in range(40)
    ]
    picks = [q["text"] for q in label_free_tasks(many, 0)[ICT_TASK][1]]
    assert picks != [q["text"] for q in label_free_tasks(many, 1)[ICT_TASK][1]]  # another seed, other sentences


def test_short_unlabeled_texts_are_a_clear_error_naming_what_a_labelled_suite_needs(tmp_path):
    corpus = write_tsv(tmp_path / "q.tsv", [r[:2] for r in ROWS], header=("id", "title"))
    with pytest.raises(ValueError, match=r"q.tsv: no labels \('tag'\) and too few held-out documents"):
        split_corpus(corpus, QUESTIONS, tmp_path / "data")
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_text("".join(json.dumps({"id": i, "title": t, "tag": g}) + "\n" for i, t, g in ROWS))
    assert split_corpus(jsonl, QUESTIONS, tmp_path / "data").kind == "labelled"  # JSONL with tags is labelled


def test_auto_picks_only_the_measured_recipe():
    assert resolve_preset("auto", gpu=True) == "cpu" and resolve_preset("auto", gpu=False) == "cpu"
    assert resolve_preset("paper", gpu=False) == "paper"  # still there by name
