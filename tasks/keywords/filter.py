"""Topic-keyword sequences for TFCSG: tokenization, GSDMM fit and the GSDMM-Filter.

The GSDMM-Filter (Shang et al.) keeps, in original order, the words of a question that "occur more frequently
than t" in the question's topic: "How to make font strikethrough on GitHub?" -> "font strikethrough GitHub".
Choices made here, and why:
- The topic of a question is its final Gibbs label z_d (not `choose_best_label`, which still counts the
  question in its own cluster).
- Counts are GSDMM's n_z^w: with the default unique-token counting that is the number of questions in z
  containing w; with `repeated_tokens=True` it is a token count. The rule is strict: n_z^w > t.
- Thresholds: the paper's absolute t (100), or the scaled default t_z = max(t_min, tau * m_z), m_z the topic's
  question count. A fixed t = 100 leaves many of the StackOverflow titles with nothing (the results log:
  docs/results/, the keyword filter on StackOverflow titles) and every question of a small corpus empty;
  tau = 0.1 reproduces t = 100 at the paper's scale and follows GSDMM's very skewed topic sizes.
- Never empty (the KL and seq2seq tasks need a target): when nothing passes, keep the question's
  `fallback_words` words with the highest lift P(w|z)/P(w) (ties: higher n_z^w, then earlier), in original
  order. A question with no content word falls back to its raw words, stopwords included.
- Output words are the first occurrence of each normalised word, in its original surface form.
"""

from __future__ import annotations

import functools
import logging
import re
import time
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from tasks.keywords.coherence import MEASURES, model_coherence, summarize_sweep, sweep_k
from tasks.keywords.gsdmm import MovieGroupProcess

KEYWORDS_CODE_VERSION = "keywords_v1"
TOKENIZER_VERSION = "tok_v1"

# gensim's STOPWORDS (from scikit-learn's list) drops words that are content in technical questions.
DOMAIN_KEEP = frozenset(
    {
        "back",
        "bottom",
        "call",
        "computer",
        "detail",
        "empty",
        "fill",
        "find",
        "fire",
        "first",
        "front",
        "full",
        "last",
        "move",
        "name",
        "next",
        "part",
        "show",
        "side",
        "system",
        "top",
    }
)
# Stems left by splitting contractions at the apostrophe ("isn't" -> "isn").
CONTRACTION_STEMS = frozenset({"aren", "couldn", "hadn", "hasn", "haven", "isn", "shouldn", "wasn", "weren", "won"})

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_START = rf"[^\W_{_HAN}]"  # a letter or digit that is not Han
_TOKEN_RE = re.compile(
    rf"(?P<han>[{_HAN}]+)"
    rf"|(?P<word>\.?{_START}(?:[^\W{_HAN}]|[.\-'’](?={_START}))*(?:\#|\+\+)?)"
)
_WIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}


class Token(NamedTuple):
    """A word as written (`surface`) and the form it is counted under (`norm`: NFKC, lowercased)."""

    surface: str
    norm: str


@functools.cache
def english_stopwords() -> frozenset[str]:
    from gensim.parsing.preprocessing import STOPWORDS

    return frozenset(STOPWORDS - DOMAIN_KEEP) | CONTRACTION_STEMS


@functools.cache
def chinese_stopwords() -> frozenset[str]:
    import stopwordsiso

    return frozenset(unicodedata.normalize("NFKC", w) for w in stopwordsiso.stopwords("zh"))


@functools.cache
def _jieba() -> Any:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    return jieba


@functools.cache  # package versions: importlib.metadata scans site-packages on every call
def tokenizer_fingerprint() -> str:
    """The tokenizer version plus the versions of the segmenter and stopword lists it depends on; put it
    in a stage fingerprint so that upgrading one of them recomputes the keywords."""
    return "+".join(
        (
            TOKENIZER_VERSION,
            f"jieba-{version('jieba')}",
            f"gensim-stopwords-{version('gensim')}",
            f"stopwordsiso-{version('stopwordsiso')}",
        )
    )


def is_stopword(norm: str) -> bool:
    if norm in english_stopwords() or norm in chinese_stopwords():
        return True
    if "'" in norm:
        return norm.replace("'", "") in english_stopwords() or norm.split("'", 1)[0] in english_stopwords()
    return False


def tokenize(text: str | None, keep_stopwords: bool = False) -> list[Token]:
    """Words of `text` in order. Technical terms stay whole (`C#`, `c++`, `ASP.NET`, `node.js`,
    `visual-studio`, `.NET`); trailing punctuation and possessive 's are dropped; Han runs are segmented by
    jieba (HMM on). Full-width ASCII is matched as half-width, but `surface` is taken from the original text.
    Not done: traditional -> simplified Chinese (it needs another dependency)."""
    if not text:
        return []
    folded = text.translate(_WIDTH)  # same length as text, so spans map back
    tokens: list[Token] = []
    for match in _TOKEN_RE.finditer(folded):
        start, end = match.span()
        if match.lastgroup == "han":
            pos = start
            for piece in _jieba().lcut(folded[start:end], HMM=True):
                surface = text[pos : pos + len(piece)]
                pos += len(piece)
                norm, stop = _han_word(surface)
                if keep_stopwords or not stop:
                    tokens.append(Token(surface, norm))
            continue
        norm, cut, stop = _word(folded[start:end])
        if keep_stopwords or not stop:
            tokens.append(Token(text[start : end - 2] if cut else text[start:end], norm))
    return tokens


# A corpus repeats its words: each distinct one is normalised and looked up once (the results log: docs/results/,
# keywords' tokenize with each distinct word looked up once).
@functools.lru_cache(maxsize=1 << 17)
def _word(folded: str) -> tuple[str, bool, bool]:
    """(norm, whether a possessive 's was dropped, stopword) of a non-Han word as matched in the folded text."""
    norm = unicodedata.normalize("NFKC", folded).lower().replace("’", "'")
    cut = norm.endswith("'s") and len(norm) > 2
    if cut:
        norm = norm[:-2]
    return norm, cut, is_stopword(norm)


@functools.lru_cache(maxsize=1 << 17)
def _han_word(surface: str) -> tuple[str, bool]:
    norm = unicodedata.normalize("NFKC", surface)
    return norm, is_stopword(norm)


def join_keywords(words: Sequence[str]) -> str:
    """Join keywords into one string: spaces between words, none between two Chinese words (Chinese BERT
    models tokenize per character)."""
    out = ""
    for word in words:
        if out and not (_is_han(out[-1]) and _is_han(word[0])):
            out += " "
        out += word
    return out


def _is_han(char: str) -> bool:
    return re.match(f"[{_HAN}]", char) is not None


def topic_threshold(size: int, mode: str, t: float, tau: float, t_min: float) -> float:
    """The count a word must exceed in a topic of `size` questions: t, or max(t_min, tau * size)."""
    if mode == "absolute":
        return float(t)
    if mode == "scaled":
        return max(float(t_min), tau * size)
    raise ValueError(f"threshold mode must be 'absolute' or 'scaled', not {mode!r}")


def _first_occurrences(tokens: Sequence[Token]) -> list[Token]:
    seen: dict[str, Token] = {}
    for token in tokens:
        seen.setdefault(token.norm, token)
    return list(seen.values())


def filter_keywords(tokens: Sequence[Token], topic_counts: Mapping[str, int], threshold: float) -> list[str]:
    """GSDMM-Filter for one question: surface forms of its words with topic count > threshold, in order,
    each word once."""
    return [t.surface for t in _first_occurrences(tokens) if topic_counts.get(t.norm, 0) > threshold]


def lift_keywords(
    tokens: Sequence[Token],
    topic_counts: Mapping[str, int],
    topic_total: int,
    word_totals: Mapping[str, int],
    grand_total: int,
    n: int,
) -> list[str]:
    """The question's n words with the highest lift P(w|z)/P(w) = (n_z^w / n_z) / (n^w / n), in original
    order. Ties (all words exclusive to the topic share the top lift) go to the higher n_z^w, then the earlier
    word. Words the model never saw are ranked last."""
    unique = _first_occurrences(tokens)

    def key(item: tuple[int, Token]) -> tuple[float, int, int]:
        pos, token = item
        in_topic = topic_counts.get(token.norm, 0)
        total = word_totals.get(token.norm, 0)
        lift = in_topic * grand_total / (topic_total * total) if in_topic and topic_total else 0.0
        return (-lift, -in_topic, pos)

    chosen = sorted(sorted(enumerate(unique), key=key)[:n])
    return [token.surface for _, token in chosen]


@dataclass(frozen=True)
class KeywordsConfig:
    """Everything that determines the keywords; all fields but `backend` belong in the stage fingerprint
    (both backends give identical labels). A non-empty `ks` sweeps K over `seeds` and fits the K with the
    best mean `coherence_metric`; otherwise `k` is used. The final fit uses `seed`."""

    k: int = field(default=30, metadata={"help": "upper bound on topics (GSDMM empties the extra ones)"})
    ks: tuple[int, ...] = field(
        default=(), metadata={"help": "sweep these K values and keep the best NPMI (default: no sweep, --k)"}
    )
    seeds: tuple[int, ...] = field(default=(0, 1, 2), metadata={"help": "seeds per K in a sweep"})
    seed: int = field(default=0, metadata={"help": "seed of the final fit"})
    alpha: float = field(default=0.1, metadata={"help": "GSDMM alpha: prior weight of a topic"})
    beta: float = field(default=0.1, metadata={"help": "GSDMM beta: prior weight of a word"})
    n_iters: int = field(default=30, metadata={"help": "Gibbs sweeps"})
    repeated_tokens: bool = False
    threshold: str = field(
        default="scaled",
        metadata={
            "help": "keyword threshold rule: scaled (max(t_min, tau * topic size)) or absolute (the paper's t)",
            "choices": ("scaled", "absolute"),
        },
    )
    t: float = field(default=100.0, metadata={"help": "absolute threshold (the paper's t)"})
    tau: float = field(default=0.1, metadata={"help": "scaled threshold: share of topic size"})
    t_min: float = field(default=2.0, metadata={"help": "scaled threshold: lower bound"})
    fallback_words: int = 2
    top_n: int = 10
    coherence_metric: str = "npmi"
    tokenizer: str = TOKENIZER_VERSION
    backend: str = field(default="numba", compare=False)
    # Warm start (a grown corpus): each row an earlier fit saw starts in that fit's topic, and the fit runs
    # `warm_iters` sweeps (it starts near where a cold fit ends). In the fingerprint only when on (older outputs
    # keep theirs), and the earlier fit's fingerprint is then part of it too.
    warm_start: bool = field(
        default=False, metadata={"help": "start from the newest earlier fit of the same corpus and settings"}
    )
    warm_iters: int = field(default=10, metadata={"help": "warm start: Gibbs sweeps from the earlier topics"})

    def __post_init__(self) -> None:
        topic_threshold(0, self.threshold, self.t, self.tau, self.t_min)
        if self.tokenizer != TOKENIZER_VERSION:
            raise ValueError(f"tokenizer {self.tokenizer!r} is not implemented; this code is {TOKENIZER_VERSION}")
        if self.coherence_metric not in MEASURES:
            raise ValueError(f"coherence_metric must be one of {MEASURES}")
        if self.k < 1 or any(k < 1 for k in self.ks):
            raise ValueError("K values must be >= 1")
        if self.ks and len(set(self.seeds)) < 3:  # one seed's coherence is too noisy to pick K by
            raise ValueError(f"a K sweep needs at least 3 distinct seeds (mean and spread), got {list(self.seeds)}")
        if self.fallback_words < 1 or self.top_n < 2:
            raise ValueError("need fallback_words >= 1 and top_n >= 2")


KEYWORDS_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("sent_id", pa.int32()),
        ("text", pa.string()),
        ("topic", pa.int32()),
        ("keywords", pa.list_(pa.string())),
        ("fallback", pa.bool_()),
    ]
)
TOPICS_SCHEMA = pa.schema(
    [
        ("topic", pa.int32()),
        ("size", pa.int64()),
        ("threshold", pa.float64()),
        ("top_words", pa.list_(pa.string())),
        ("coherence", pa.float64()),
        ("umass", pa.float64()),
        ("npmi", pa.float64()),
        ("c_v", pa.float64()),
    ]
)


def mine_keywords_table(
    table: pa.Table, config: KeywordsConfig, prior: dict[tuple[str, int], int] | None = None
) -> tuple[pa.Table, pa.Table, dict[str, Any], list[dict[str, Any]]]:
    """Fit GSDMM on the `text` column of a (doc_id, sent_id, text) table and filter each row's keywords.

    Returns (keywords, topics, stats, sweep_rows). Keywords keep the input row order; `topic` is null for
    rows without a content word (they are not fitted). Topic ids are renumbered 0.. by size, largest first.
    `prior` (a warm start): (doc_id, sent_id) -> the topic an earlier fit gave that row; those rows start
    there, the others at random (see `MovieGroupProcess.fit`).
    """
    started = time.perf_counter()
    texts = table.column("text").to_pylist()
    tokens = [tokenize(text) for text in texts]
    fitted = [i for i, toks in enumerate(tokens) if toks]
    docs = [[t.norm for t in tokens[i]] for i in fitted]
    tokenize_s = time.perf_counter() - started

    k, sweep_rows = choose_k(docs, config)
    sweep_s = time.perf_counter() - started - tokenize_s
    init = starting_labels(table, fitted, prior, k) if prior else None
    model = fit_gsdmm(docs, k, config, init)
    fit_s = time.perf_counter() - started - tokenize_s - sweep_s

    topics = TopicFilter.of(model, config)
    coherence = model_coherence(model, docs, config.top_n) if docs else {m: {} for m in MEASURES}
    labels = dict(zip(fitted, model.labels_.tolist() if model.labels_ is not None else [], strict=True))
    rows = [row_keywords(texts[i], toks, labels.get(i), topics, config) for i, toks in enumerate(tokens)]

    keywords = keywords_table(table, rows)
    topics_out = topics_table(model, topics, coherence, config)
    stats = keywords_stats(model, topics, coherence, rows, len(fitted), k, bool(sweep_rows), config)
    stats["seconds"] = {"tokenize": tokenize_s, "sweep": sweep_s, "fit": fit_s, "total": time.perf_counter() - started}
    stats["sweeps"] = len(model.history_)
    stats["moved_per_sweep"] = [h["moved"] for h in model.history_]
    stats["warm_rows"] = int((init >= 0).sum()) if init is not None else 0
    return keywords, topics_out, stats, sweep_rows


def starting_labels(
    table: pa.Table, fitted: list[int], prior: dict[tuple[str, int], int], k: int
) -> np.ndarray | None:
    """Each fitted row's topic in the earlier fit, -1 where it had none; None when the earlier topics do not
    fit this K (a different K was chosen): then the fit starts cold."""
    doc_ids, sent_ids = table.column("doc_id").to_pylist(), table.column("sent_id").to_pylist()
    init = np.array([prior.get((doc_ids[i], sent_ids[i]), -1) for i in fitted], dtype=np.int64)
    return init if init.max(initial=-1) < k else None


def choose_k(docs: list[list[str]], config: KeywordsConfig) -> tuple[int, list[dict[str, Any]]]:
    """(K to fit, the sweep's rows): `config.k` with no sweep, else the K with the best mean coherence."""
    if not (config.ks and docs):
        return config.k, []
    sweep_rows = sweep_k(
        docs,
        None,
        config.ks,
        config.seeds,
        alpha=config.alpha,
        beta=config.beta,
        n_iters=config.n_iters,
        top_n=config.top_n,
        backend=config.backend,
        repeated_tokens=config.repeated_tokens,
    )
    return summarize_sweep(sweep_rows, config.coherence_metric)[1], sweep_rows


def fit_gsdmm(
    docs: list[list[str]], k: int, config: KeywordsConfig, init: np.ndarray | None = None
) -> MovieGroupProcess:
    """The final GSDMM fit, seeded with `config.seed`; from `init` labels (a warm start) when given."""
    model = MovieGroupProcess(
        K=k,
        alpha=config.alpha,
        beta=config.beta,
        n_iters=config.n_iters if init is None else config.warm_iters,
        random_state=config.seed,
        backend=config.backend,
        repeated_tokens=config.repeated_tokens,
    )
    model.fit(docs, init_labels=init)
    return model


@dataclass(frozen=True)
class TopicFilter:
    """What the GSDMM-Filter needs of a fitted model: each populated topic's threshold and word counts."""

    sizes: np.ndarray  # (K,) questions per GSDMM cluster
    populated: list[int]  # cluster ids with questions, largest first (ties: lower id)
    new_id: dict[int, int]  # cluster id -> output topic id (its rank in `populated`)
    thresholds: dict[int, float]  # cluster id -> the count a word must exceed
    distribution: list[dict[str, int]]  # n_z^w per cluster
    topic_totals: list[int]  # n_z per cluster
    word_totals: dict[str, int]  # n^w over all clusters
    grand_total: int  # n

    @classmethod
    def of(cls, model: MovieGroupProcess, config: KeywordsConfig) -> TopicFilter:
        sizes = np.asarray(model.cluster_doc_count)
        populated = sorted(np.flatnonzero(sizes).tolist(), key=lambda z: (-sizes[z], z))
        thresholds = {
            z: topic_threshold(int(sizes[z]), config.threshold, config.t, config.tau, config.t_min) for z in populated
        }
        distribution = model.cluster_word_distribution
        word_totals: dict[str, int] = {}
        for dist in distribution:
            for w, c in dist.items():
                word_totals[w] = word_totals.get(w, 0) + c
        topic_totals = model.cluster_word_count
        return cls(
            sizes=sizes,
            populated=populated,
            new_id={z: i for i, z in enumerate(populated)},
            thresholds=thresholds,
            distribution=distribution,
            topic_totals=topic_totals,
            word_totals=word_totals,
            grand_total=int(sum(topic_totals)),
        )


class RowKeywords(NamedTuple):
    topic: int | None  # output topic id; None for a row that was not fitted
    words: list[str]
    fallback: bool
    kind: str  # "filter", or the fallback counted in stats: "fallback_lift", "fallback_raw", "empty"


def row_keywords(
    text: str | None, tokens: list[Token], z: int | None, topics: TopicFilter, config: KeywordsConfig
) -> RowKeywords:
    """One row's keywords: the GSDMM-Filter of its topic `z`, else its top-lift words; a row that was not
    fitted (`z` None: no content word) keeps its raw words, stopwords included, or its stripped text."""
    if z is None:
        raw = _first_occurrences(tokenize(text, keep_stopwords=True))
        words = [t.surface for t in raw] or ([text.strip()] if text and text.strip() else [])
        return RowKeywords(None, words, True, "fallback_raw" if words else "empty")
    words = filter_keywords(tokens, topics.distribution[z], topics.thresholds[z])
    if words:
        return RowKeywords(topics.new_id[z], words, False, "filter")
    words = lift_keywords(
        tokens, topics.distribution[z], topics.topic_totals[z], topics.word_totals, topics.grand_total,
        config.fallback_words,
    )  # fmt: skip
    return RowKeywords(topics.new_id[z], words, True, "fallback_lift")


def keywords_table(table: pa.Table, rows: list[RowKeywords]) -> pa.Table:
    """The `keywords` table: the input's ids and text beside each row's topic, keywords and fallback flag."""
    return pa.table(
        {
            "doc_id": table.column("doc_id").cast(pa.string()),
            "sent_id": table.column("sent_id").cast(pa.int32()),
            "text": table.column("text").cast(pa.string()),
            "topic": pa.array([r.topic for r in rows], pa.int32()),
            "keywords": pa.array([r.words for r in rows], pa.list_(pa.string())),
            "fallback": pa.array([r.fallback for r in rows], pa.bool_()),
        },
        schema=KEYWORDS_SCHEMA,
    )


def topics_table(
    model: MovieGroupProcess, topics: TopicFilter, coherence: dict[str, dict[int, float]], config: KeywordsConfig
) -> pa.Table:
    """The `topics` table: one row per populated topic, largest first."""
    populated = topics.populated
    return pa.table(
        {
            "topic": pa.array([topics.new_id[z] for z in populated], pa.int32()),
            "size": pa.array([int(topics.sizes[z]) for z in populated], pa.int64()),
            "threshold": pa.array([topics.thresholds[z] for z in populated], pa.float64()),
            "top_words": pa.array([model.top_words(z, config.top_n) for z in populated], pa.list_(pa.string())),
            "coherence": pa.array([coherence[config.coherence_metric][z] for z in populated], pa.float64()),
            **{m: pa.array([coherence[m][z] for z in populated], pa.float64()) for m in MEASURES},
        },
        schema=TOPICS_SCHEMA,
    )


def keywords_stats(
    model: MovieGroupProcess,
    topics: TopicFilter,
    coherence: dict[str, dict[int, float]],
    rows: list[RowKeywords],
    n_fitted: int,
    k: int,
    swept: bool,
    config: KeywordsConfig,
) -> dict[str, Any]:
    """The stage's counts: rows fitted and not, fallbacks by kind, keywords per row, topics and coherence."""
    counts = {kind: sum(r.kind == kind for r in rows) for kind in ("fallback_lift", "fallback_raw", "empty")}
    n_keywords = np.array([len(r.words) for r in rows])
    n_rows = len(rows)
    return {
        "code_version": KEYWORDS_CODE_VERSION,
        "tokenizer": tokenizer_fingerprint(),
        "rows": n_rows,
        "fitted_rows": n_fitted,
        "rows_without_content_words": n_rows - n_fitted,
        "vocab_size": model.vocab_size,
        "k": int(k),
        "k_source": "sweep" if swept else "config",
        "populated_topics": len(topics.populated),
        "threshold_mode": config.threshold,
        "threshold_empty": counts["fallback_lift"] + counts["fallback_raw"] + counts["empty"],
        **counts,
        "fallback_rate": float(np.mean([r.fallback for r in rows])) if n_rows else 0.0,
        "keywords_per_row": float(n_keywords.mean()) if n_rows else 0.0,
        "rows_with_1_keyword": int(np.sum(n_keywords == 1)),
        "rows_with_2plus_keywords": int(np.sum(n_keywords >= 2)),
        "moved_last_sweep": model.history_[-1]["moved"] if model.history_ else 0,
        "coherence_mean": {m: _mean([coherence[m][z] for z in topics.populated]) for m in MEASURES},
    }


def _mean(values: list[float]) -> float | None:
    finite = [v for v in values if v == v]
    return float(np.mean(finite)) if finite else None
