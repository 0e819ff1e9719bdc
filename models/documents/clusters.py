"""Clustered batches for the `documents` recipe (`sampling = "clustered"` or `"clustered-pages"`): in-batch
negatives that are hard.

With random batches of 32 sections out of thousands, the other 31 passages are mostly about something else,
and the contrastive task is easy. Topic-aware sampling (Hofstätter et al., SIGIR 2021: TAS-B) groups the
training queries into clusters of about a batch each by the start model's embeddings and fills each batch
from one cluster, so a title must find its section among sections that read alike. The documents are
embedded once by the start model (the title and the beginning of the body, `max_len` tokens), clustered by
seeded spherical k-means (k-means++ seeding), and the labels saved in the run folder (a resumed run reads them back).
On a corpus of pages cut into sections, a cluster of sections is often one page's, whose sections are not
negatives of each other (`same_page = "masked"`, pages.py): `clustered-pages` clusters the pages instead (the mean
of their sections' vectors), about a batch of pages a cluster, and spreads each page's sections over its
cluster's batches, so a batch holds sections of pages that read alike.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

CLUSTERS_FILE = "clusters.npy"
ITERATIONS = 20


def document_texts(titles: list[str], sentences: list[list[str]]) -> list[str]:
    """What a document is embedded by: its title and the beginning of its body."""
    return [f"{t} {' '.join(s[:3])}".strip() for t, s in zip(titles, sentences, strict=True)]


@torch.no_grad()
def embed_texts(init_from: str, tokenizer, texts: list[str], max_len: int, batch: int = 64) -> np.ndarray:
    """Mean-pooled, normalised vectors of `texts` by the start encoder (loaded here, so a resumed run whose
    model is not yet loaded embeds with the start's weights too), rounded to 4 decimals so the clusters do
    not turn on the last bits of a thread count's float sums."""
    from transformers import AutoModel

    from models.gur.model import pool

    encoder = AutoModel.from_pretrained(init_from).eval()
    out = []
    for i in range(0, len(texts), batch):
        enc = tokenizer(texts[i : i + batch], padding=True, truncation=True, max_length=max_len, return_tensors="pt")
        hidden = encoder(**enc).last_hidden_state
        vec = torch.nn.functional.normalize(pool(hidden, enc["attention_mask"], "mean"), dim=-1)
        out.append(vec.numpy())
    return np.round(np.concatenate(out) if out else np.zeros((0, 1), np.float32), 4)


def spherical_kmeans(x: np.ndarray, k: int, seed: int, iterations: int = ITERATIONS) -> np.ndarray:
    """Cluster labels of the unit rows of `x`: `k` centres seeded as k-means++ does (each next centre a row drawn
    with odds growing with its cosine distance to the nearest centre so far), then `iterations` rounds of
    assign-to-the-nearest (cosine) and re-centre; an emptied cluster keeps its centre."""
    n = len(x)
    k = max(1, min(k, n))
    rng = np.random.default_rng([seed, 7])
    chosen = [int(rng.integers(n))]
    nearest = x @ x[chosen[0]]
    for _ in range(1, k):
        odds = np.clip(1.0 - nearest, 0.0, None) ** 2
        pick = int(rng.choice(n, p=odds / odds.sum())) if odds.sum() > 0 else int(rng.integers(n))
        chosen.append(pick)
        nearest = np.maximum(nearest, x @ x[pick])
    centres = x[chosen].astype(np.float64)
    labels = np.zeros(n, np.int64)
    for round_ in range(iterations):
        new = np.argmax(x @ centres.T, axis=1)
        if round_ and np.array_equal(new, labels):
            break
        labels = new
        for c in range(k):
            members = x[labels == c]
            if len(members):
                centre = members.sum(0)
                centres[c] = centre / max(np.linalg.norm(centre), 1e-12)
    return labels


def page_vectors(vectors: np.ndarray, pages: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the unit mean of each page's document vectors, each document's index into them); `pages` a number per
    row of `vectors`."""
    unique, index = np.unique(pages, return_inverse=True)
    sums = np.zeros((len(unique), vectors.shape[1]), np.float64)
    np.add.at(sums, index, vectors)
    return sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12), index


def cluster_documents(
    out: Path,
    init_from: str,
    tokenizer,
    texts: list[str],
    rows: np.ndarray,
    batch_size: int,
    max_len: int,
    seed: int,
    pages: np.ndarray | None = None,
) -> np.ndarray:
    """A cluster label per document (-1 for those not in `rows`, the training rows): about one batch of
    documents a cluster. With `pages` (a page number per document: `clustered-pages`), the pages are clustered
    (by the mean of their documents' vectors), about one batch of pages a cluster, and a document takes its
    page's label. Read from `out/clusters.npy` when a run resumes."""
    from storage.atomic import atomic_path

    path = out / CLUSTERS_FILE
    if path.exists():
        return np.load(path)
    labels = np.full(len(texts), -1, np.int64)
    if len(rows):
        vectors = embed_texts(init_from, tokenizer, [texts[int(r)] for r in rows], max_len)
        if pages is None:
            labels[rows] = spherical_kmeans(vectors, -(-len(rows) // batch_size), seed)
        else:
            centres, index = page_vectors(vectors, pages[rows])
            labels[rows] = spherical_kmeans(centres, -(-len(centres) // batch_size), seed)[index]
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.save(f, labels)
    return labels
