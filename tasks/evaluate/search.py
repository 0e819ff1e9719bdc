"""Exact nearest-neighbour search: chunked matrix products and top-k in torch.

Exact search at evaluation sizes takes seconds on a CPU (`benchmarks/search.py`; the results log:
docs/results/, exact search against `semantic_search`), so no approximate index is needed there. For
millions of documents, replace `exact_search` with an ANN index (FAISS, hnswlib) behind the same
(scores, indices) contract.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def _device(device: str | None):
    import torch

    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


def exact_search(
    queries: np.ndarray,
    docs: np.ndarray,
    k: int,
    query_chunk: int = 1024,
    doc_chunk: int = 262_144,
    device: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k documents by dot product (cosine for L2-normalised rows), best first.

    Returns `(scores, indices)`, each (queries, min(k, docs)). Memory is bounded by
    `query_chunk x doc_chunk` scores: each document chunk keeps its own top k and the
    candidates are merged with one more top-k. Exact ties are ordered as `torch.topk` leaves them.
    """
    import torch

    dev = _device(device)
    n_docs = docs.shape[0]
    k = min(k, n_docs)
    doc_tensor = torch.from_numpy(np.ascontiguousarray(docs, dtype=np.float32)).to(dev)
    out_scores = np.empty((queries.shape[0], k), dtype=np.float32)
    out_indices = np.empty((queries.shape[0], k), dtype=np.int64)
    with torch.inference_mode():
        for q0 in range(0, queries.shape[0], query_chunk):
            q = torch.from_numpy(np.ascontiguousarray(queries[q0 : q0 + query_chunk], dtype=np.float32)).to(dev)
            best_s, best_i = None, None
            for d0 in range(0, n_docs, doc_chunk):
                block = q @ doc_tensor[d0 : d0 + doc_chunk].T  # (Bq, Bd)
                s, i = torch.topk(block, min(k, block.shape[1]), dim=1)
                i = i + d0
                if best_s is None:
                    best_s, best_i = s, i
                else:
                    merged_s, pos = torch.topk(torch.cat([best_s, s], dim=1), k, dim=1)
                    best_i = torch.gather(torch.cat([best_i, i], dim=1), 1, pos)
                    best_s = merged_s
            out_scores[q0 : q0 + len(q)] = best_s.cpu().numpy()
            out_indices[q0 : q0 + len(q)] = best_i.cpu().numpy()
    return out_scores, out_indices


def full_rankings(
    scores_blocks: Iterator[tuple[int, np.ndarray]], exclude: np.ndarray | None = None
) -> Iterator[tuple[int, np.ndarray]]:
    """For each block of scores (start row, (B, N)), every document ranked best first: (B, N), or
    (B, N - 1) when `exclude[q]` names a document to leave out of query q's ranking (the query
    itself, for a collection searched against itself).

    The sort is stable, so exact ties keep document order (BM25 gives many zero-score ties).
    """
    import torch

    for start, block in scores_blocks:
        scores = torch.from_numpy(np.ascontiguousarray(block, dtype=np.float32))
        if exclude is not None:
            rows = torch.arange(scores.shape[0])
            cols = torch.from_numpy(np.asarray(exclude[start : start + scores.shape[0]], dtype=np.int64))
            scores = scores.clone()
            scores[rows, cols] = -torch.inf  # finite scores all rank above it: it lands last and is cut
        order = torch.sort(scores, dim=1, descending=True, stable=True).indices
        yield start, (order[:, :-1] if exclude is not None else order).numpy()


def dense_score_blocks(queries: np.ndarray, docs: np.ndarray, block: int = 512) -> Iterator[tuple[int, np.ndarray]]:
    """(start row, query block x all documents) dot products, `block` queries at a time."""
    import torch

    doc_tensor = torch.from_numpy(np.ascontiguousarray(docs, dtype=np.float32))
    with torch.inference_mode():
        for start in range(0, queries.shape[0], block):
            q = torch.from_numpy(np.ascontiguousarray(queries[start : start + block], dtype=np.float32))
            yield start, (q @ doc_tensor.T).numpy()
