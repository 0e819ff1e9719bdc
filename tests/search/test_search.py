"""Search over an embed output: MiniLM finds the known nearest document of a tiny real corpus (exact and HNSW
agree), BM25 and fusion by hand, and each bad input is one line from `gur search` / `gur embed`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from samples.tiny_bert import tiny_bert
from samples.wiki_docs import wiki_documents, write_jsonl
from tests.helpers import REPO

pytestmark = pytest.mark.usefixtures("one_thread")

# Each query paraphrases one article's subject without its title's words (so BM25 alone would not do it).
QUERIES = {
    "a political philosophy that rejects rulers and the state": "Anarchism",
    "the country in north africa whose capital is algiers": "Algeria",
}


@pytest.fixture(scope="module")
def wiki_root(tmp_path_factory) -> tuple[Path, dict[str, str], list[dict]]:
    """30 Wikipedia articles in two files, ingested, embedded with MiniLM and made the `embeddings` view."""
    from storage.catalog import refresh_catalog
    from tasks.embed.model_choice import choose_model
    from tasks.embed.outputs import set_active
    from tasks.embed.task import embed_stage
    from tasks.embed.vectors import EmbedConfig
    from tasks.ingest.documents import IngestConfig
    from tasks.ingest.task import ingest

    base = tmp_path_factory.mktemp("search")
    docs = wiki_documents(30, sentences=3)
    corpus, root = base / "corpus", base / "root"
    corpus.mkdir()
    write_jsonl(corpus / "a.jsonl", docs[:15])
    write_jsonl(corpus / "b.jsonl", docs[15:])
    documents = ingest.fn(str(corpus), IngestConfig(source_name="wiki"), str(root), workers=1)
    chosen = choose_model(root, "minilm")
    ref, _ = embed_stage(documents, EmbedConfig(chosen.fingerprint, chosen.path), root)
    set_active(root, ref, {"model": chosen.fingerprint, "model_path": chosen.path, "spec": "minilm"})
    refresh_catalog(root)
    return root, ref, docs


def test_the_known_nearest_document_comes_first(wiki_root):
    from tasks.embed.search import run_search

    root, ref, docs = wiki_root
    titles = {d["title"] for d in docs}
    for query, title in QUERIES.items():
        assert title in titles
        result = run_search(root, query, k=3)
        assert result["index"] == "exact" and result["embeddings"] == ref["path"]
        assert result["hits"][0].title == title, [h.title for h in result["hits"]]
        assert result["hits"][0].score > result["hits"][1].score
    # a document's own title and text find it at cosine 1 (the query is embedded by the stage's code)
    own = docs[7]["title"] + "\n" + docs[7]["text"]
    top = run_search(root, own, k=1)["hits"][0]
    assert top.title == docs[7]["title"] and top.score == pytest.approx(1.0, abs=1e-5)


def test_hnsw_agrees_with_exact_search_on_the_corpus(wiki_root):
    from tasks.embed.search import DenseSearcher

    root, _, _ = wiki_root
    exact = DenseSearcher.open(root)
    approximate = DenseSearcher.open(root, exact_max=0)  # every size above it: the HNSW index, built and kept
    assert (exact.index.kind, approximate.index.kind) == ("exact", "hnsw")
    queries = exact.vectors.matrix[:10]
    for ours, theirs in zip(exact.search_vectors(queries, 5), approximate.search_vectors(queries, 5), strict=True):
        assert [d for d, _ in ours] == [d for d, _ in theirs]
        np.testing.assert_allclose([s for _, s in ours], [s for _, s in theirs], atol=1e-5)
    assert list((root / "embed-index").glob("*/_manifest.json"))


def test_bm25_and_hybrid(wiki_root):
    from tasks.embed.search import run_search

    root, _, _ = wiki_root
    bm25 = run_search(root, "Algeria Algiers", k=3, mode="bm25")["hits"]
    assert bm25[0].title == "Algeria" and "Algeria" in bm25[0].snippet
    assert run_search(root, "qqqzzz", k=3, mode="bm25")["hits"] == []  # no shared word: no BM25 hit
    # the BM25 index is kept (built by the first search, memory-mapped by the next: same hits, no rebuild)
    (kept,) = (root / "bm25-index").glob("*/_manifest.json")
    built = kept.stat().st_mtime_ns
    assert run_search(root, "Algeria Algiers", k=3, mode="bm25")["hits"] == bm25
    assert kept.stat().st_mtime_ns == built
    hybrid = run_search(root, list(QUERIES)[0], k=5, mode="hybrid")["hits"]
    assert hybrid[0].title == "Anarchism"
    assert [h.rank for h in hybrid] == [1, 2, 3, 4, 5]


def test_reciprocal_rank_fusion_by_hand():
    from tasks.embed.search import reciprocal_rank_fusion

    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a", "d"]], k0=60)
    # a: 1/61 + 1/62, c: 1/63 + 1/61, b: 1/62, d: 1/63
    assert [d for d, _ in fused] == ["a", "c", "b", "d"]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62)
    assert reciprocal_rank_fusion([["x", "y"], ["y", "x"]]) == [("x", 1 / 61 + 1 / 62), ("y", 1 / 62 + 1 / 61)]


def test_the_snippet_shows_the_query_word():
    from tasks.embed.search import snippet

    text = "word " * 100 + "Algiers is the capital. " + "more " * 100
    shown = snippet(text, "capital of Algeria")
    assert "capital" in shown and shown.startswith("…") and shown.endswith("…") and len(shown) <= 162


def gur(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GUR_HOME": str(root)}
    return subprocess.run(
        [sys.executable, "-c", "import gur_cli, sys; sys.exit(gur_cli.main())", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_gur_search_prints_the_ranked_table(wiki_root):
    root, _, _ = wiki_root
    done = gur(root, "search", list(QUERIES)[1], "--k", "2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("exact search over embed/")
    assert lines[1].split()[:5] == ["rank", "doc_id", "title", "snippet", "score"]
    assert lines[3].split()[0] == "1" and "Algeria" in lines[3]


@pytest.mark.slow
def test_bad_input_is_one_line(tmp_path, wiki_root):
    root, ref, docs = wiki_root
    empty = gur(root, "search", "  ")
    assert empty.returncode == 1
    assert empty.stderr.strip().splitlines() == [
        'gur: error: empty query: give the words to search for, e.g. gur search "how to sort a dict"'
    ]

    not_a_model = tmp_path / "not-a-model"
    not_a_model.mkdir()
    (not_a_model / "notes.txt").write_text("weights went elsewhere\n")
    for args in (("embed", str(not_a_model)), ("search", "anarchism", "--model", str(not_a_model))):
        done = gur(root, *args)
        assert done.returncode == 1
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith(
            f"gur: error: model {not_a_model}: not an encoder folder (no modules.json or config.json)"
        )

    # The embeddings in use were made by a model folder that now holds another model (64-d, not 32-d).
    from storage.catalog import refresh_catalog
    from tasks.embed.model_choice import choose_model
    from tasks.embed.outputs import read_active, set_active
    from tasks.embed.search import active_documents
    from tasks.embed.task import embed_stage
    from tasks.embed.vectors import EmbedConfig

    folder = tiny_bert(tmp_path / "tiny", [d["text"] for d in docs])
    chosen = choose_model(root, str(folder))
    before = read_active(root)
    small, _ = embed_stage(active_documents(root), EmbedConfig(chosen.fingerprint, chosen.path), root)
    set_active(root, small, {"model": chosen.fingerprint, "model_path": chosen.path, "spec": str(folder)})
    try:
        import shutil

        shutil.rmtree(folder)
        other = tiny_bert(folder, [d["text"] for d in docs])
        from transformers import BertModel

        config = BertModel.from_pretrained(str(other)).config
        config.hidden_size, config.intermediate_size = 64, 128
        BertModel(config).save_pretrained(str(other))
        done = gur(root, "search", "anarchism")
        assert done.returncode == 1
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith(
            f"gur: error: dimension mismatch: the embeddings {small['path']} holds 32-d vectors but the model gives "
            "64-d ones"
        ), line
    finally:
        set_active(root, {"path": before["path"], "fingerprint": before["fingerprint"]}, before)
        refresh_catalog(root)


def test_rollback_and_promote_move_search_to_the_champions_embeddings(tmp_path, capsys, monkeypatch):
    """A rolled-back model stops serving search at once when the restored champion's embeddings of the same
    documents are on disk (the `embeddings` view follows); when they are not, the command says what still
    serves search and how to refresh it, and changes nothing."""
    import duckdb

    from gur_cli import main as gur
    from storage.catalog import refresh_catalog
    from storage.champion import read_champion
    from storage.layout import CATALOG, MANIFEST
    from tasks.embed.model_choice import choose_model
    from tasks.embed.outputs import read_active, set_active
    from tasks.embed.task import embed_stage
    from tasks.embed.vectors import EmbedConfig
    from tasks.ingest.documents import IngestConfig
    from tasks.ingest.task import ingest

    docs = wiki_documents(8, sentences=2)
    corpus, root = tmp_path / "corpus", tmp_path / "root"
    corpus.mkdir()
    write_jsonl(corpus / "a.jsonl", docs)
    documents = ingest.fn(str(corpus), IngestConfig(source_name="wiki"), str(root), workers=1)
    texts = [d["text"] for d in docs]
    first, second = tiny_bert(tmp_path / "first", texts), tiny_bert(tmp_path / "second", texts[:2])

    def embed_champion() -> dict[str, str]:  # what a night does after promoting
        chosen = choose_model(root, None)
        ref, _ = embed_stage(documents, EmbedConfig(chosen.fingerprint, chosen.path), root)
        set_active(root, ref, {"model": chosen.fingerprint, "model_path": chosen.path, "spec": chosen.spec})
        refresh_catalog(root)
        return ref

    def view_model() -> str:
        with duckdb.connect(str(root / CATALOG), read_only=True) as con:
            (model,) = con.execute("SELECT DISTINCT model FROM embeddings").fetchone()
        return model

    assert gur(["--root", str(root), "promote", str(first)]) == 0
    assert "search:" not in capsys.readouterr().out  # nothing embedded yet: nothing to say
    ref_first = embed_champion()
    assert gur(["--root", str(root), "promote", str(second)]) == 0
    out = capsys.readouterr().out
    assert f"search: still uses the embeddings of {first} ({ref_first['path']}) until the next night" in out
    assert read_active(root)["path"] == ref_first["path"]  # nothing changed
    assert gur(["--root", str(root), "rollback"]) == 0  # first again, its embeddings in use
    assert gur(["--root", str(root), "promote", str(second), "--embed"]) == 0  # embeds now
    out = capsys.readouterr().out
    ref_second = {k: read_active(root)[k] for k in ("path", "fingerprint")}
    assert f"search: embedded the documents with the champion and now uses them ({ref_second['path']})" in out
    assert read_active(root)["model"] == choose_model(root, str(second)).fingerprint
    assert view_model() == read_active(root)["model"] != choose_model(root, str(first)).fingerprint

    import tasks.embed.index

    monkeypatch.setattr(tasks.embed.index, "EXACT_MAX", 3)  # 8 documents: searched through an HNSW index
    assert gur(["--root", str(root), "rollback"]) == 0
    out = capsys.readouterr().out
    assert f"search: now uses the champion's embeddings ({ref_first['path']})" in out
    assert len(list((root / tasks.embed.index.INDEX_STAGE).glob(f"*/{MANIFEST}"))) == 1  # built by the switch
    monkeypatch.undo()
    active = read_active(root)
    assert active["path"] == ref_first["path"] and active["model_path"] == str(first)
    assert view_model() == active["model"]  # the catalog's view follows the pointer
    assert gur(["--root", str(root), "promote", str(second)]) == 0
    assert f"now uses the champion's embeddings ({ref_second['path']})" in capsys.readouterr().out
    assert gur(["--root", str(root), "rollback"]) == 0
    assert read_active(root)["path"] == ref_first["path"]

    # A catalog that cannot be refreshed: the pointer switched, the command succeeds and says what to run.
    import storage.catalog

    def busy(*args, **kwargs):
        raise storage.catalog.CatalogBusyError("catalog busy")

    monkeypatch.setattr(storage.catalog, "refresh_catalog", busy)
    assert gur(["--root", str(root), "promote", str(second)]) == 0
    out = capsys.readouterr().out
    assert "view was not refreshed (catalog busy): run `gur catalog --refresh`" in out
    assert read_active(root)["path"] == ref_second["path"]
    monkeypatch.undo()
    assert gur(["--root", str(root), "rollback"]) == 0
    assert read_active(root)["path"] == ref_first["path"] and view_model() == read_active(root)["model"]
    assert gur(["--root", str(root), "promote", str(first)]) == 0
    assert "search: uses the champion's embeddings" in capsys.readouterr().out

    # The embeddings in use deleted by hand: the promotion is done and says search is unchanged, exit 0.
    import shutil

    shutil.rmtree(root / ref_first["path"])
    assert gur(["--root", str(root), "promote", str(second)]) == 0
    out = capsys.readouterr().out
    assert "champion #" in out and f"search: unchanged, still {ref_first['path']} (" in out
    assert read_champion(root)["export"] == str(second) and read_active(root)["path"] == ref_first["path"]
