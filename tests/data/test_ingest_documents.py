"""The ingest stage body: stable ids, duplicates and rejects in their table, counts in the manifest."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from storage.shards import finished_shards, sum_shard_stats
from tasks.ingest.documents import IngestConfig, ingest_corpus, make_doc_id
from tasks.ingest.readers import ReaderConfig


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def test_duplicates_and_bad_lines_are_rejected_and_counted(tmp_path):
    src = tmp_path / "corpus.jsonl"
    write_jsonl(
        src,
        [
            {"id": "a", "title": "T", "text": "Same text."},
            {"id": "b", "title": "T", "text": "Same text."},  # same content: duplicate_document
            {"id": "a", "title": "U", "text": "Other text."},  # same id: duplicate_id
            {"id": "c", "text": ""},
            {"id": "d", "text": "Kept too."},
        ],
    )
    out = tmp_path / "out"
    totals = ingest_corpus(src, IngestConfig(ReaderConfig(), "", docs_per_shard=1), out)
    assert totals == {"documents": 2, "rejects": 3, "shards": 2}
    docs = [pq.read_table(p).to_pylist() for p in finished_shards(out)]
    assert [[d["source_id"] for d in shard] for shard in docs] == [["a"], ["d"]]
    assert docs[0][0]["doc_id"] == make_doc_id("corpus", "T", "Same text.")
    assert docs[0][0]["doc_id"].startswith("corpus-")
    rejects = [r for p in finished_shards(out, "rejects") for r in pq.read_table(p).to_pylist()]
    assert [(r["location"].rsplit(":", 1)[1], r["reason"]) for r in rejects] == [
        ("2", "duplicate_document"),
        ("3", "duplicate_id"),
        ("4", "empty_text"),
    ]
    stats = sum_shard_stats(out)
    assert stats["reject:duplicate_id"] == 1 and stats["reject:empty_text"] == 1 and stats["documents"] == 2


def test_doc_ids_are_stable_and_content_addressed():
    assert make_doc_id("wiki", "A", "text") == make_doc_id("wiki", "A", "text")
    assert make_doc_id("wiki", "A", "text") != make_doc_id("wiki", "A", "text.")
    assert make_doc_id("wiki", None, "text") == make_doc_id("wiki", "", "text")
    assert make_doc_id("wiki", "A", "t") != make_doc_id("news", "A", "t")


def test_a_shard_also_ends_at_its_character_budget(tmp_path):
    src = tmp_path / "c.jsonl"
    write_jsonl(src, [{"text": f"document {i:02d}"} for i in range(8)])  # 11 characters each
    out = tmp_path / "out"
    config = IngestConfig(ReaderConfig(), "", docs_per_shard=100, shard_chars=30)
    assert ingest_corpus(src, config, out)["shards"] == 3
    assert [pq.read_metadata(p).num_rows for p in finished_shards(out)] == [3, 3, 2]
