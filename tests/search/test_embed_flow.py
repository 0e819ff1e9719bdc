"""The embed flow under Prefect after a real build-pairs: the `embeddings` view joins `documents`, and the nightly
hook embeds only a new file's documents, re-embeds everything after a promotion, and says which."""

from __future__ import annotations

from pathlib import Path

import pytest

from samples.tiny_bert import tiny_bert
from samples.wiki_docs import wiki_documents, write_jsonl

pytestmark = pytest.mark.usefixtures("one_thread", "prefect_harness")


def reseed(folder: Path) -> None:
    """Other random weights in the same architecture: another model fingerprint."""
    import torch
    from transformers import BertModel

    torch.manual_seed(1)
    BertModel(BertModel.from_pretrained(str(folder)).config).save_pretrained(str(folder))


def test_embed_flow_view_and_the_nightly_hook(tmp_path):
    from flows.build_pairs import build_pairs
    from flows.embed import embed_flow, night_embeddings
    from storage.catalog import connect_catalog
    from storage.champion import PROMOTION_SCHEMA, set_champion

    assert "embedded" in PROMOTION_SCHEMA.names
    docs = wiki_documents(30, sentences=4)
    corpus, root = tmp_path / "corpus", tmp_path / "root"
    corpus.mkdir()
    write_jsonl(corpus / "a.jsonl", docs[:15])
    first = build_pairs(input_path=str(corpus), root=str(root))
    texts = [d["title"] + " " + d["text"] for d in docs]
    model_a, model_b = tiny_bert(tmp_path / "a", texts), tiny_bert(tmp_path / "b", texts)
    reseed(model_b)
    from models.encoders import minilm_path
    from tasks.embed.model_choice import default_model

    # no model given, no champion, no night: the model in use is the shipped MiniLM, never a train export
    assert default_model(root) == (
        str(minilm_path()),
        "the shipped MiniLM (no night has run and no model was promoted)",
    )
    set_champion(root, {"export": str(model_a), "method": "manual", "metrics": {}})
    result = embed_flow(root=str(root))
    assert result["why"] == "champion #1" and result["note"].startswith("embedded all 15 documents")

    def view() -> tuple:
        con = connect_catalog(root)
        try:
            return con.execute(
                "SELECT count(*), count(DISTINCT e.model), min(len(e.embedding)) FROM embeddings e "
                "JOIN documents d USING (doc_id)"
            ).fetchone()
        finally:
            con.close()

    assert view() == (15, 1, 32)

    # A night with a new file and no promotion: that file's documents only.
    write_jsonl(corpus / "b.jsonl", docs[15:])
    data = build_pairs(input_path=str(corpus), root=str(root))["documents"]
    assert data != first["documents"]
    note = night_embeddings(root, data, promoted=False)
    assert note.startswith("champion #1 unchanged: embedded 15 new documents (1 shards), reused 15 (1 shards)"), note
    assert view() == (30, 1, 32)
    assert night_embeddings(root, data, promoted=False).startswith("champion #1 unchanged: up to date: 30 embeddings")

    # A promotion: the new champion embeds everything once and the view switches to it.
    set_champion(root, {"export": str(model_b), "method": "manual", "metrics": {}})
    note = night_embeddings(root, data, promoted=True)
    assert note.startswith("re-embedded for the new champion: embedded all 30 documents"), note
    con = connect_catalog(root)
    try:
        (model,) = con.execute("SELECT DISTINCT model FROM embeddings").fetchone()
    finally:
        con.close()
    from tasks.evaluate.models import model_fingerprint

    assert model == model_fingerprint(str(Path(model_b)))

    # Sentences: one vector per sentence of the build, joinable with `sentences`; the documents view stays.
    result = embed_flow(model=str(model_a), unit="sentences", root=str(root))
    assert result["embeddings"]["path"].startswith("embed/") and "sentences" in result["note"]
    con = connect_catalog(root)
    try:
        joined, sentences, dims = con.execute(
            "SELECT (SELECT count(*) FROM sentence_embeddings e JOIN sentences s USING (doc_id, sent_id)), "
            "(SELECT count(*) FROM sentences), (SELECT min(len(embedding)) FROM sentence_embeddings)"
        ).fetchone()
        (still,) = con.execute("SELECT DISTINCT model FROM embeddings").fetchone()
    finally:
        con.close()
    assert joined == sentences > 30 and dims == 32
    assert still == model  # embedding sentences never switches the documents' view
