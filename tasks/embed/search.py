"""`gur search` and the search page: dense (an embeddings output), BM25 (the same documents) and both fused.

    dense = DenseSearcher.open(root, model=None)      # the `embeddings` view's output, or the model's own
    hits = dense.search("how to sort a dict", k=10)   # [(doc_id, cosine)], best first
    bm25 = Bm25Searcher(root, dense.documents)        # bm25s over the same documents' title + text (kept)
    fused = reciprocal_rank_fusion([dense_ids, bm25_ids])
    rows = result_rows(documents, hits, query)        # rank, doc_id, title, snippet, score

The query is embedded by the same code as the documents (`tasks/embed/vectors.py: encode_texts`),
so a document's own text finds it at cosine 1. Hybrid is reciprocal rank fusion (Cormack et al.
2009): each document scores the sum of 1 / (60 + rank) over the lists that hold it, from each
list's top `FUSE_DEPTH`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from models.encoders import word_tokens
from storage.layout import MANIFEST, recorded_path
from storage.stage_output import ref_dir, stage_ref
from tasks.embed.index import ExactIndex, HnswIndex, Vectors, open_index, read_vectors
from tasks.embed.outputs import current_documents, documents_of, find_output, read_active

RRF_K = 60  # the constant of reciprocal rank fusion (the paper's, and Elasticsearch's and OpenSearch's default)
FUSE_DEPTH = 100  # how deep each list goes into the fusion
SNIPPET_CHARS = 160
MODES = ("dense", "bm25", "hybrid")


def check_query(query: str) -> str:
    query = " ".join((query or "").split())
    if not query:
        raise ValueError('empty query: give the words to search for, e.g. gur search "how to sort a dict"')
    return query


@dataclass(frozen=True)
class Hit:
    rank: int
    doc_id: str
    title: str | None
    snippet: str
    score: float

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("rank", "doc_id", "title", "snippet", "score")}


def documents_glob(root: Path, documents: dict[str, str]) -> str:
    return str(ref_dir(root, documents) / "part-*.parquet")


def read_documents(glob: str, doc_ids: list[str] | None = None) -> dict[str, tuple[str | None, str]]:
    """doc_id -> (title, text) of every document, or of `doc_ids` only (DuckDB reads just their rows)."""
    import duckdb

    if doc_ids is not None and not doc_ids:
        return {}
    con = duckdb.connect()
    try:
        sql = f"SELECT doc_id, title, text FROM read_parquet('{glob.replace(chr(39), chr(39) * 2)}')"
        if doc_ids is not None:
            con.execute("CREATE TEMP TABLE wanted (doc_id VARCHAR)")
            con.executemany("INSERT INTO wanted VALUES (?)", [[d] for d in doc_ids])
            sql += " WHERE doc_id IN (SELECT doc_id FROM wanted)"
        rows = con.execute(sql).fetchall()
    finally:
        con.close()
    return {doc_id: (title, text) for doc_id, title, text in rows}


def snippet(text: str, query: str, chars: int = SNIPPET_CHARS) -> str:
    """`chars` characters of `text` around the first query word it holds (else its start), on one line."""
    lower = text.lower()
    found = [p for p in (lower.find(w) for w in word_tokens(query)) if p >= 0]
    start = max(0, min(found) - chars // 4) if found else 0
    piece = " ".join(text[start : start + chars].split())
    return ("…" if start else "") + piece + ("…" if start + chars < len(text) else "")


def result_rows(documents: dict[str, tuple[str | None, str]], hits: list[tuple[str, float]], query: str) -> list[Hit]:
    rows = []
    for rank, (doc_id, score) in enumerate(hits, 1):
        title, text = documents.get(doc_id, (None, ""))
        rows.append(Hit(rank, doc_id, title, snippet(text, query), float(score)))
    return rows


def reciprocal_rank_fusion(rankings: list[list[str]], k0: int = RRF_K) -> list[tuple[str, float]]:
    """Documents by the sum of 1 / (k0 + rank) over the rankings that hold them (rank 1 is the best);
    ties by the best single rank, then doc_id."""
    scores: dict[str, float] = {}
    best: dict[str, int] = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking, 1):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (k0 + rank)
            best[doc_id] = min(best.get(doc_id, rank), rank)
    return sorted(scores.items(), key=lambda item: (-item[1], best[item[0]], item[0]))


class DenseSearcher:
    """An embeddings output loaded for queries: its vectors (or HNSW index), its model, its documents."""

    def __init__(self, root: Path, manifest: dict[str, Any], index: ExactIndex | HnswIndex, vectors: Vectors):
        self.root, self.manifest, self.index, self.vectors = root, manifest, index, vectors
        self.ref = stage_ref("embed", manifest["fingerprint"])
        self.documents = manifest["upstream"][0]
        self.model_path = recorded_path(root, manifest["config"]["model_path"])  # where it is now
        self.model_fp = manifest["config"]["model"]

    @classmethod
    def open(cls, root: Path, model: str | None = None, exact_max: int | None = None) -> DenseSearcher:
        """The `embeddings` view's output (model None), else the newest output of `model` over the documents
        in use; a model without embeddings is one line naming `gur embed`."""
        manifest = embeddings_manifest(root, model)
        ref = stage_ref("embed", manifest["fingerprint"])
        vectors = read_vectors(sorted(ref_dir(root, ref).glob("part-*.parquet")))
        kwargs = {} if exact_max is None else {"exact_max": exact_max}
        return cls(root, manifest, open_index(root, ref, vectors, **kwargs), vectors)

    def embed_query(self, query: str) -> np.ndarray:
        import torch

        from tasks.embed.model_choice import check_encoder_folder
        from tasks.embed.vectors import encode_texts, load_encoder

        path = Path(self.model_path)
        check_encoder_folder(path, f"the model of {self.ref['path']}")
        model, threads = load_encoder(str(path)), torch.get_num_threads()
        torch.set_num_threads(1)  # one short text: more threads only wait on each other (far slower on busy cores)
        try:
            return encode_texts(model, [query], 1)
        finally:
            torch.set_num_threads(threads)

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        return self.search_vectors(self.embed_query(check_query(query)), k)[0]

    def search_vectors(self, queries: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        scores, rows = self.index.search(queries, k)
        ids = self.vectors.doc_ids
        pairs = zip(scores, rows, strict=True)
        return [[(ids[r], float(s)) for s, r in zip(sc, rw, strict=True) if r >= 0] for sc, rw in pairs]


def embeddings_manifest(root: Path, model: str | None) -> dict[str, Any]:
    """The manifest of the embeddings output a search reads (see `DenseSearcher.open`)."""
    import json

    from tasks.embed.model_choice import choose_model

    active = read_active(root)
    if model is None:
        if active is None:
            raise FileNotFoundError(f"no embeddings under {root}: run `gur embed` (the champion) or `gur embed MODEL`")
        path = root / active["path"] / MANIFEST
        if not path.exists():
            raise FileNotFoundError(f"{root / active['path']}: the embeddings in use are incomplete; run `gur embed`")
        return json.loads(path.read_text(encoding="utf-8"))
    chosen = choose_model(root, model)
    documents = active_documents(root)
    found = find_output(root, chosen.fingerprint, documents["fingerprint"]) or find_output(root, chosen.fingerprint)
    if found is None:
        raise FileNotFoundError(f"no embeddings of {chosen.spec} under {root}: run `gur embed {chosen.spec}` first")
    return found


def active_documents(root: Path) -> dict[str, str]:
    """The documents the embeddings in use were made from, else those of the catalog's build."""
    active = read_active(root)
    if active is not None and (root / active["path"] / MANIFEST).exists():
        return documents_of(root, stage_ref("embed", active["fingerprint"]))
    return current_documents(root)


BM25_STAGE = "bm25-index"
BM25_CODE_VERSION = "bm25_v1"


class Bm25Searcher:
    """bm25s (`models.encoders.BM25Ranker`, the evaluation's baseline) over every document's title + text.

    The index is a stage output of its own (`<root>/bm25-index/<fingerprint>/`, keyed by the documents
    output), built on the first search and memory-mapped after: a `gur search --bm25` over 100,000
    documents does not re-tokenize the corpus per query."""

    def __init__(self, root: Path, documents: dict[str, str], log=None):
        from models.encoders import BM25Ranker
        from storage.fingerprint import fingerprint
        from storage.stage_output import StageOutput

        self.glob = documents_glob(root, documents)
        ranker = BM25Ranker()
        params = {"k1": ranker.k1, "b": ranker.b, "tokens": "word_tokens"}
        fp = fingerprint(BM25_STAGE, BM25_CODE_VERSION, params, [documents["fingerprint"]])
        out = StageOutput.open(root, BM25_STAGE, fp, log=log)
        if out.complete:
            self.doc_ids = json.loads((out.dir / "doc_ids.json").read_text(encoding="utf-8"))
            self.ranker = BM25Ranker.load(out.dir / "index", len(self.doc_ids), ranker.k1, ranker.b)
            return
        from tasks.embed.vectors import document_texts

        docs = read_documents(self.glob)
        self.doc_ids = sorted(docs)
        self.ranker = ranker
        if not self.doc_ids:
            return  # nothing to keep: an empty corpus is searched as such
        ranker.index(document_texts([docs[d][0] for d in self.doc_ids], [docs[d][1] for d in self.doc_ids]))
        out.dir.mkdir(parents=True, exist_ok=True)
        ranker.save(out.dir / "index")
        (out.dir / "doc_ids.json").write_text(json.dumps(self.doc_ids), encoding="utf-8")
        out.finish(
            code_version=BM25_CODE_VERSION,
            config=params,
            inputs={"documents": documents["path"]},
            upstream=[documents],
            tables={},
            rows={"documents": len(self.doc_ids)},
            drops={},
        )

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        query = check_query(query)
        if not self.doc_ids:
            return []
        scores = self.ranker.scores([query])[0]
        order = np.argsort(-scores, kind="stable")[:k]
        return [(self.doc_ids[i], float(scores[i])) for i in order if scores[i] > 0]


def run_search(root: Path, query: str, model: str | None = None, k: int = 10, mode: str = "dense") -> dict[str, Any]:
    """What `gur search` prints: {"mode", "model", "embeddings", "index", "hits": [Hit, ...]}."""
    query = check_query(query)
    if k < 1:
        raise ValueError(f"--k {k}: give 1 or more results")
    out: dict[str, Any] = {"mode": mode, "model": None, "embeddings": None, "index": None}
    dense = None
    if mode in ("dense", "hybrid"):
        dense = DenseSearcher.open(root, model)
        documents = dense.documents
        out.update(model=dense.model_path, embeddings=dense.ref["path"], index=dense.index.kind)
    else:
        documents = active_documents(root)
    depth = max(k, FUSE_DEPTH) if mode == "hybrid" else k
    lists = []
    if dense is not None:
        lists.append(dense.search(query, depth))
    if mode in ("bm25", "hybrid"):
        lists.append(Bm25Searcher(root, documents).search(query, depth))
    hits = lists[0] if len(lists) == 1 else reciprocal_rank_fusion([[d for d, _ in h] for h in lists])
    hits = hits[:k]
    docs = read_documents(documents_glob(root, documents), [d for d, _ in hits])
    out["hits"] = result_rows(docs, hits, query)
    out["documents"] = documents["path"]
    return out
