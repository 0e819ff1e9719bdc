"""The documents recipe's pages: a section's page from the corpus's own `page#section` ids (through the ingest output
a split was made from), sections of one page masked as negatives, and batches of clustered pages whose sections
spread over the cluster."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from models.documents.pages import page_numbers, page_of, split_source_ids
from models.documents.pairs import DocumentPairConfig, DocumentPairs, DocumentStream
from models.tfcsg.losses import topic_negative_mask
from models.tfcsg.question_data import clustered_order
from samples.tiny_bert import tiny_bert
from samples.wiki_docs import wiki_documents
from tests.helpers.document_pairs import WordTokenizer, sentences_file


@pytest.fixture(scope="module")
def sections():
    """40 wiki documents as sections of 10 pages (`page-k#n`), the page's sections apart in the corpus order."""
    docs = wiki_documents(40, sentences=6)
    return [{**d, "source_id": f"page-{i % 10}#{i // 10}", "id": f"doc-{i:03d}"} for i, d in enumerate(docs)]


def split_root(tmp_path, sections):
    """A root holding an ingest output (hashed `doc_id`, the corpus's `source_id`) and the split output made from
    it, whose manifest names its `documents` input relative to the root, as the pipeline writes them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ingest = tmp_path / "root" / "ingest" / "0123456789abcdef"
    ingest.mkdir(parents=True)
    columns = {"doc_id": [d["id"] for d in sections], "source_id": [d["source_id"] for d in sections]}
    pq.write_table(pa.table(columns), ingest / "part-00000.parquet")
    split = tmp_path / "root" / "split" / "fedcba9876543210"
    split.mkdir(parents=True)
    sentences_file(split / "part-00000.parquet", sections)
    manifest = {"stage": "split", "inputs": {"documents": "ingest/0123456789abcdef"}}
    (split / "_manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return split


def test_a_page_is_the_part_of_a_source_id_before_its_hash_and_an_id_without_one_is_its_own_page():
    assert page_of("library/os#3") == "library/os" and page_of("ls.1#0") == "ls.1"
    assert page_of("plain-id") == "plain-id" and page_of("#2") == ""
    ids = ["a", "b", "c", "d", "e"]
    numbers = page_numbers(ids, {"a": "p#1", "b": "q#1", "c": "p#2", "d": "d"})  # `e`: no source id known
    assert numbers.tolist() == [0, 1, 0, 2, 3]
    assert page_numbers(["x", "y"], {"x": "", "y": ""}).tolist() == [0, 1]  # empty ids are no shared page


def test_the_source_ids_are_read_through_the_split_manifest_and_missing_ones_leave_every_document_its_own_page(
    tmp_path, sections
):
    split = split_root(tmp_path, sections)
    found = split_source_ids(split)
    assert found == {d["id"]: d["source_id"] for d in sections}
    assert split_source_ids(split / "part-00000.parquet") == found  # one file of the stage folder
    (split / "_manifest.json").unlink()
    assert split_source_ids(split) == {}  # a split folder out of its root: no pages, no error


def test_masked_sections_of_one_page_are_no_negatives_and_clustered_pages_spread_a_page_over_its_cluster(
    tmp_path, sections
):
    split = split_root(tmp_path, sections)
    config = DocumentPairConfig(str(split), batch_size=8, heldout_fraction=0.0, seed=2, same_page="masked")
    data = DocumentPairs(config, WordTokenizer())
    pages = page_numbers(data.questions.ids, split_source_ids(split))
    data.set_pages(pages)
    rows = np.array([0, 10, 20, 1, 2, 3, 4, 5])  # sections 0, 10 and 20 are page-0's
    batch = data.collate(rows)
    assert batch["topics"].tolist() == [0, 0, 0, 1, 2, 3, 4, 5] and batch["text_ids"].tolist() == rows.tolist()
    mask = topic_negative_mask(batch["topics"], batch["text_ids"])
    assert mask[0, 1] and mask[1, 2] and not mask[0, 3]  # a page's other sections are no negatives; others are
    plain = DocumentPairs(replace(config, same_page="negative"), WordTokenizer())
    plain.set_pages(pages)
    assert plain.collate(rows)["topics"].tolist() == rows.tolist()  # each its own: the old behaviour
    with pytest.raises(ValueError, match="same_page must be one of"):
        DocumentPairs(replace(config, same_page="pages"), WordTokenizer())
    with pytest.raises(ValueError, match="10 page numbers for 40 documents"):
        data.set_pages(pages[:10])

    # clusters of pages: every page's sections in one cluster, spread over it (never two in a row of 4 here)
    clusters = (pages // 5).astype(np.int64)  # pages 0-4 and 5-9: two clusters of 20 sections
    order = clustered_order(clusters, np.random.default_rng(0), pages)
    assert sorted(order.tolist()) == list(range(40))
    assert len(np.flatnonzero(np.diff(clusters[order]) != 0)) == 1  # each cluster's rows in one run
    windows = [pages[order[i : i + 4]] for i in range(0, 40, 4)]
    assert all(len(set(w.tolist())) >= 3 for w in windows)  # a batch of 4 holds three pages or more
    assert not np.array_equal(order, clustered_order(clusters, np.random.default_rng(1), pages))

    data = DocumentPairs(replace(config, sampling="clustered-pages"), WordTokenizer())
    data.set_pages(pages)
    data.set_clusters(clusters)
    stream = DocumentStream(data)
    groups = [stream.next_batch()[1]["topics"].numpy() for _ in range(5)]
    assert all(len(set(g.tolist())) >= 5 for g in groups)  # batches of 8 from 5 pages of 4 sections


def test_clustered_pages_gives_each_section_its_pages_cluster_by_the_start_model(tmp_path, sections):
    from transformers import AutoTokenizer

    from models.documents.clusters import cluster_documents, document_texts

    split = split_root(tmp_path, sections)
    model = tiny_bert(tmp_path / "tiny-bert", [d["title"] + " " + d["text"] for d in sections])
    tok = AutoTokenizer.from_pretrained(str(model))
    data = DocumentPairs(DocumentPairConfig(str(split), batch_size=4, heldout_fraction=0.0), tok)
    pages = page_numbers(data.questions.ids, split_source_ids(split))
    texts = document_texts(data.questions.titles, data.questions.sentences)
    labels = cluster_documents(tmp_path, str(model), tok, texts, data.train_rows, 4, 32, seed=0, pages=pages)
    assert labels.max() + 1 == 3  # ten pages, about four pages a cluster
    for page in range(10):
        assert len(set(labels[pages == page].tolist())) == 1  # a page's sections share its cluster
