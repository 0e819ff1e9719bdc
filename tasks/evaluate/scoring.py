"""The evaluation tasks: a model (encoder or BM25) and a dataset in, metric values out.

Each task embeds or scores, then hands plain arrays to `tasks.evaluate.metrics`. Scores are dot
products of L2-normalised vectors (cosine) for encoders and BM25 scores for the sparse ranker.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from models.encoders import BM25Ranker, Model
from tasks.evaluate import metrics as M
from tasks.evaluate.data import LabelledTexts, RetrievalSet, SimilarityPairs
from tasks.evaluate.search import dense_score_blocks, exact_search, full_rankings

# v2: a unit also keeps its per-query values, the fingerprint of the texts it scored and their overlap
# with the model's training input (the numbers themselves are those of v1).
EVAL_CODE_VERSION = "eval-v2"


@dataclass(frozen=True)
class MetricValue:
    """One number; `k=None` for metrics without a cut-off, `n` = queries or pairs it averages over.

    Ranking metrics also carry the value of each query (`per_query`, whose mean is `value`) and the
    query's row in the dataset (`queries`), so two models can be compared query by query.
    """

    task: str
    metric: str
    k: int | None
    value: float
    n: int
    queries: np.ndarray | None = field(default=None, compare=False, repr=False)
    per_query: np.ndarray | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class RetrievalConfig:
    """Dense retrieval as in GUR: recall@100 and MRR@10."""

    recall_k: int = 100
    mrr_k: int = 10
    batch_size: int = 64


@dataclass(frozen=True)
class QuestionRetrievalConfig:
    """Question retrieval as in TFCSG: every question queries all the others, relevant = same label.

    `max_queries` > 0 samples that many queries (seeded) against the full collection; 0 uses all.
    MAP and MRR are over the full ranking of the other questions, so every question is encoded
    whatever `max_queries` is (it saves the scoring, not the encoding); a smaller collection is
    `DatasetSpec.limit` (`--limit`), which changes what is measured.
    """

    max_queries: int = field(default=0, metadata={"help": "question retrieval: first N titles as queries (0: all)"})
    seed: int = 0
    precision_ks: tuple[int, ...] = (1, 5, 10)
    batch_size: int = 64
    block: int = 512


@dataclass(frozen=True)
class ZeroShotConfig:
    """Zero-shot classification: each text takes the label whose embedded name is nearest.

    A label's text is `template` with `{label}` replaced by its name, `-` and `_` read as spaces.
    """

    template: str = "{label}"
    batch_size: int = 64


def _encode(model: Model, texts: list[str], batch_size: int) -> np.ndarray:
    return model.encode(texts, batch_size=batch_size)


def dense_retrieval(
    model: Model, data: RetrievalSet, config: RetrievalConfig = RetrievalConfig()
) -> list[MetricValue]:
    """recall@k and MRR@k of each query's top documents (exact search; BM25 scores for `bm25`)."""
    k = max(config.recall_k, config.mrr_k)
    if isinstance(model, BM25Ranker):
        import torch

        model.index(data.docs)
        parts = []
        for start in range(0, len(data.queries), 256):
            block = torch.from_numpy(model.scores(data.queries[start : start + 256]))
            parts.append(torch.topk(block, min(k, block.shape[1]), dim=1).indices.numpy())
        indices = np.concatenate(parts) if parts else np.zeros((0, k), np.int64)
    else:
        docs = _encode(model, data.docs, config.batch_size)
        queries = _encode(model, data.queries, config.batch_size)
        _, indices = exact_search(queries, docs, k)
    hits = M.hits_from_relevant(indices, data.relevant)
    n_rel = np.array([len(r) for r in data.relevant])
    n = len(data.queries)
    rows = np.arange(n)
    recall, mrr = M.recall_at_k(hits, n_rel, config.recall_k), M.mrr_at_k(hits, config.mrr_k)
    return [
        MetricValue("retrieval", "recall", config.recall_k, float(recall.mean()), n, rows, recall),
        MetricValue("retrieval", "mrr", config.mrr_k, float(mrr.mean()), n, rows, mrr),
    ]


def question_retrieval(
    model: Model,
    data: LabelledTexts,
    config: QuestionRetrievalConfig = QuestionRetrievalConfig(),
    embeddings: np.ndarray | None = None,
) -> list[MetricValue]:
    """P@k, MAP and MRR over full rankings of the other questions (stable sort: ties keep file order)."""
    counts = np.bincount(data.labels, minlength=len(data.label_names))
    candidates = np.flatnonzero(counts[data.labels] > 1)  # a question alone in its label has nothing to find
    if config.max_queries and config.max_queries < len(candidates):
        rng = np.random.default_rng(config.seed)
        rows = np.sort(rng.choice(candidates, size=config.max_queries, replace=False))
    else:
        rows = candidates
    if isinstance(model, BM25Ranker):
        model.index(data.texts)
        blocks = (
            (start, model.scores([data.texts[i] for i in rows[start : start + config.block]]))
            for start in range(0, len(rows), config.block)
        )
    else:
        emb = embeddings if embeddings is not None else _encode(model, data.texts, config.batch_size)
        blocks = dense_score_blocks(emb[rows], emb, config.block)
    per_metric: dict[tuple[str, int | None], list[np.ndarray]] = {}
    for start, order in full_rankings(blocks, exclude=rows):
        q_labels = data.labels[rows[start : start + order.shape[0]]]
        hits = data.labels[order] == q_labels[:, None]
        n_rel = counts[q_labels] - 1
        for k in config.precision_ks:
            per_metric.setdefault(("precision", k), []).append(M.precision_at_k(hits, k))
        per_metric.setdefault(("map", None), []).append(M.average_precision_at_k(hits, n_rel))
        per_metric.setdefault(("mrr", None), []).append(M.mrr_at_k(hits))
    values = {key: np.concatenate(parts) for key, parts in per_metric.items()}
    return [
        MetricValue("question_retrieval", metric, k, float(v.mean()), len(rows), rows, v)
        for (metric, k), v in values.items()
    ]


def sts(model: Model, data: SimilarityPairs, batch_size: int = 64) -> list[MetricValue]:
    """Pearson and Spearman of cosine(a, b) against the gold scores (NaN if every cosine is equal)."""
    if isinstance(model, BM25Ranker):
        raise TypeError("STS needs an encoder; BM25 is a ranker")
    unique = sorted(set(data.a) | set(data.b))
    emb = _encode(model, unique, batch_size)
    row = {t: i for i, t in enumerate(unique)}
    a = emb[[row[t] for t in data.a]]
    b = emb[[row[t] for t in data.b]]
    cosine = (a * b).sum(axis=1)
    n = len(cosine)
    return [
        MetricValue("sts", "pearson", None, M.pearson(cosine, data.gold), n),
        MetricValue("sts", "spearman", None, M.spearman(cosine, data.gold), n),
    ]


def label_texts(names: list[str], template: str) -> list[str]:
    return [template.format(label=name.replace("-", " ").replace("_", " ")) for name in names]


def zero_shot(
    model: Model,
    data: LabelledTexts,
    config: ZeroShotConfig = ZeroShotConfig(),
    embeddings: np.ndarray | None = None,
) -> list[MetricValue]:
    """Accuracy and macro-F1 of nearest-label predictions. A text the model cannot represent (a zero
    vector, or no BM25 term shared with any label) gets no label (-1), which counts as wrong."""
    labels = label_texts(data.label_names, config.template)
    if isinstance(model, BM25Ranker):
        model.index(labels)
        scores = model.scores(data.texts)
        unknown = scores.max(axis=1) <= 0
    else:
        emb = embeddings if embeddings is not None else _encode(model, data.texts, config.batch_size)
        scores = emb @ _encode(model, labels, config.batch_size).T
        unknown = ~np.any(emb != 0, axis=1)
    pred = np.where(unknown, -1, scores.argmax(axis=1))
    n = len(pred)
    return [
        MetricValue("zero_shot", "accuracy", None, M.accuracy(data.labels, pred), n),
        MetricValue("zero_shot", "macro_f1", None, M.macro_f1(data.labels, pred, len(labels)), n),
    ]
