"""Topic coherence (UMass, NPMI, C_V), the GSDMM K sweep, and NMI for judging topics against labels.

Conventions (Röder et al. 2015, as in Palmetto and gensim 4.4, which these match exactly on short texts):
- Counts are document-level and boolean: D(w) is the number of reference documents containing w, D(w, u)
  the number containing both; P(w) = D(w)/N and P(w, u) = D(w, u)/N. gensim's sliding windows (10 for NPMI,
  110 for C_V) treat a text shorter than the window as one window, so for questions and titles the two
  agree.
- A topic is its top-n words, highest first; a topic with fewer than 2 words has no coherence (NaN) and is
  left out of means. Every topic word must occur in the reference documents.
- eps = 1e-12 (gensim's EPSILON) keeps pairs that never co-occur finite.
- UMass: mean over i > j of log((P(w_i, w_j) + eps) / P(w_j)), w_j the higher-ranked word.
- NPMI: mean over ordered pairs i != j of log((P(w_i, w_j) + eps) / (P(w_i) P(w_j))) / -log(P(w_i, w_j) + eps).
- C_V: each topic word w gets the vector v(w) = (NPMI(w, u))_u over the topic words u (NPMI(w, w) is ~1);
  the topic value is the mean over w of cos(v(w), sum_u v(u)).
The K sweep picks K by mean NPMI by default: C_V rewards word sets that merely share contexts and is known
to score some degenerate topics highly, and UMass is not normalised across corpus sizes.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tasks.keywords.gsdmm import MovieGroupProcess

EPSILON = 1e-12
MEASURES = ("umass", "npmi", "c_v")


def cooccurrence(docs: Sequence[Sequence[Hashable]], words: Sequence[Hashable]) -> tuple[np.ndarray, int]:
    """(C, N): C[i, j] = number of docs containing both words[i] and words[j] (C[i, i] = D(words[i]));
    N = number of docs."""
    index = {w: i for i, w in enumerate(dict.fromkeys(words))}
    if len(index) != len(words):
        raise ValueError("words must be distinct")
    rows: list[int] = []
    cols: list[int] = []
    for doc in docs:
        present = sorted({index[t] for t in doc if t in index})
        for a in present:
            rows.extend([a] * len(present))
            cols.extend(present)
    counts = np.zeros((len(index), len(index)), dtype=np.int64)
    np.add.at(counts, (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)), 1)
    return counts, len(docs)


def _npmi_matrix(counts: np.ndarray, n_docs: int, eps: float) -> np.ndarray:
    p = np.diag(counts) / n_docs
    p_joint = counts / n_docs + eps
    return np.log(p_joint / np.outer(p, p)) / -np.log(p_joint)


def topic_coherence(
    topics: Sequence[Sequence[Hashable]],
    docs: Sequence[Sequence[Hashable]],
    measures: Sequence[str] = MEASURES,
    eps: float = EPSILON,
) -> dict[str, np.ndarray]:
    """Per-topic coherence for each measure (arrays aligned with `topics`; NaN for topics under 2 words)."""
    unknown = set(measures) - set(MEASURES)
    if unknown:
        raise ValueError(f"unknown coherence measures {sorted(unknown)}; known: {MEASURES}")
    all_words = list(dict.fromkeys(w for topic in topics for w in topic))
    counts, n_docs = cooccurrence(docs, all_words)
    if np.any(np.diag(counts) == 0):
        missing = [w for w, c in zip(all_words, np.diag(counts), strict=True) if c == 0]
        raise ValueError(f"topic words missing from the reference documents: {missing[:5]}")
    col = {w: i for i, w in enumerate(all_words)}
    out = {m: np.full(len(topics), np.nan) for m in measures}
    for t, topic in enumerate(topics):
        if len(topic) != len(set(topic)):
            raise ValueError(f"topic {t} repeats a word")
        if len(topic) < 2:
            continue
        ids = np.array([col[w] for w in topic])
        sub = counts[np.ix_(ids, ids)]
        p = np.diag(sub) / n_docs
        if "umass" in measures:
            i, j = np.tril_indices(len(ids), k=-1)
            out["umass"][t] = np.mean(np.log((sub[i, j] / n_docs + eps) / p[j]))
        if "npmi" in measures or "c_v" in measures:
            npmi = _npmi_matrix(sub, n_docs, eps)
            if "npmi" in measures:
                out["npmi"][t] = npmi[~np.eye(len(ids), dtype=bool)].mean()
            if "c_v" in measures:
                total = npmi.sum(axis=0)
                cos = npmi @ total / (np.linalg.norm(npmi, axis=1) * np.linalg.norm(total))
                out["c_v"][t] = cos.mean()
    return out


def model_topics(model: MovieGroupProcess, top_n: int = 10) -> dict[int, list[Hashable]]:
    """Top words of each non-empty cluster, keyed by cluster id."""
    return {z: model.top_words(z, top_n) for z, m in enumerate(model.cluster_doc_count) if m > 0}


def model_coherence(
    model: MovieGroupProcess, docs: Sequence[Sequence[Hashable]], top_n: int = 10
) -> dict[str, dict[int, float]]:
    """Per-topic coherence of the model's non-empty clusters, {measure: {cluster: value}}."""
    topics = model_topics(model, top_n)
    values = topic_coherence(list(topics.values()), docs)
    return {m: dict(zip(topics, v.tolist(), strict=True)) for m, v in values.items()}


def _nanmean(values: Any) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return float(np.mean(finite)) if finite else math.nan


def sweep_k(
    docs: Sequence[Sequence[Hashable]],
    vocab_size: int | None,
    ks: Sequence[int],
    seeds: Sequence[int],
    *,
    alpha: float = 0.1,
    beta: float = 0.1,
    n_iters: int = 30,
    top_n: int = 10,
    backend: str = "numba",
    repeated_tokens: bool = False,
) -> list[dict[str, Any]]:
    """Fit GSDMM for every (K, seed) and score it: one row per fit with `k`, `seed`, `populated` (non-empty
    clusters), `scored` (topics with >= 2 words) and the mean coherence of each measure over those topics.

    Coherence of one fit varies with the seed about as much as with K on real titles, so use >= 3 seeds.
    """
    rows = []
    for k in ks:
        for seed in seeds:
            model = MovieGroupProcess(
                K=k,
                alpha=alpha,
                beta=beta,
                n_iters=n_iters,
                random_state=seed,
                backend=backend,
                repeated_tokens=repeated_tokens,
            )
            model.fit(docs, vocab_size)
            coherence = model_coherence(model, docs, top_n)
            row: dict[str, Any] = {
                "k": int(k),
                "seed": int(seed),
                "populated": int(np.count_nonzero(model.cluster_doc_count)),
                "scored": sum(not math.isnan(v) for v in coherence["npmi"].values()),
            }
            row.update({m: _nanmean(coherence[m].values()) for m in MEASURES})
            rows.append(row)
    return rows


def summarize_sweep(rows: Sequence[dict[str, Any]], metric: str = "npmi") -> tuple[list[dict[str, Any]], int]:
    """Per-K mean, standard deviation, min and max of each measure and of `populated`, and the K with the
    highest mean `metric` (ties go to the smaller K, the cheaper model)."""
    if metric not in MEASURES:
        raise ValueError(f"metric must be one of {MEASURES}")
    by_k: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        by_k.setdefault(row["k"], []).append(row)
    summary = []
    for k in sorted(by_k):
        group = by_k[k]
        entry: dict[str, Any] = {"k": k, "n_seeds": len(group)}
        for name in (*MEASURES, "populated"):
            values = [float(r[name]) for r in group if not math.isnan(r[name])]
            entry[f"{name}_mean"] = float(np.mean(values)) if values else math.nan
            entry[f"{name}_std"] = statistics.pstdev(values) if values else math.nan
            entry[f"{name}_min"] = min(values) if values else math.nan
            entry[f"{name}_max"] = max(values) if values else math.nan
        summary.append(entry)
    if not summary:
        raise ValueError("empty sweep")
    scored = [e for e in summary if not math.isnan(e[f"{metric}_mean"])]
    best = max(scored, key=lambda e: (e[f"{metric}_mean"], -e["k"]))["k"] if scored else summary[0]["k"]
    return summary, int(best)


def plot_sweep(rows: Sequence[dict[str, Any]], path: str | Path, metric: str = "npmi") -> Path:
    """Write a PNG of coherence (mean and spread over seeds) and populated clusters against K."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary, best = summarize_sweep(rows, metric)
    ks = [e["k"] for e in summary]
    fig, axes = plt.subplots(1, len(MEASURES) + 1, figsize=(4 * (len(MEASURES) + 1), 3.4), constrained_layout=True)
    for ax, name in zip(axes, (*MEASURES, "populated"), strict=True):
        for r in rows:
            ax.plot(r["k"], r[name], ".", color="0.6")
        ax.errorbar(ks, [e[f"{name}_mean"] for e in summary], yerr=[e[f"{name}_std"] for e in summary], marker="o")
        ax.axvline(best, color="tab:red", linestyle=":", linewidth=1)
        ax.set_xlabel("K")
        ax.set_title(name + (" (picks K)" if name == metric else ""))
    fig.suptitle(f"GSDMM K sweep: best K = {best} by mean {metric}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def normalized_mutual_info(labels_true: Sequence[Hashable], labels_pred: Sequence[Hashable]) -> float:
    """NMI with arithmetic-mean normalisation, 2 I(U; V) / (H(U) + H(V)) (scikit-learn's default);
    1.0 when both labelings have a single class."""
    if len(labels_true) != len(labels_pred):
        raise ValueError("label sequences differ in length")
    _, u = np.unique(np.asarray(labels_true, dtype=object).astype(str), return_inverse=True)
    _, v = np.unique(np.asarray(labels_pred, dtype=object).astype(str), return_inverse=True)
    n = len(u)
    if n == 0:
        return 1.0
    table = np.zeros((u.max() + 1, v.max() + 1))
    np.add.at(table, (u, v), 1)
    pu, pv, puv = table.sum(1) / n, table.sum(0) / n, table / n
    h_u = -np.sum(pu * np.log(pu))
    h_v = -np.sum(pv * np.log(pv))
    if h_u == 0 and h_v == 0:
        return 1.0
    nz = puv > 0
    mi = np.sum(puv[nz] * np.log(puv[nz] / np.outer(pu, pv)[nz]))
    return float(2 * mi / (h_u + h_v))
