"""`[train] method = "auto"`: the recipe follows the corpus's shape.

Short texts without bodies (questions, titles) get TFCSG, built and measured for them; documents with
bodies (manual sections, wiki pages, support articles) get the `documents` recipe (models/documents/):
title -> body and inverse-cloze pairs of the corpus's own documents, which TFCSG, cutting every text
to 32 tokens, never sees. A record has a body when its text holds two sentences or more and at least
BODY_WORDS words; the corpus is long-document when at least half of a sample of its training side
has one. The figures behind the rule are the corpus ladder's first nights in the results log (docs/results/).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from models.training.presets import DOCUMENT_PRESETS
from tasks.ingest.readers import Record, read_corpus
from tasks.nightly.config import CorpusConfig, TrainSection
from tasks.split.sentences import split_sentences

# `method = "gur"` in a night: GUR's pairs and losses on the model in use (a bert2bert warm start), in the
# start's pooling and at a fine-tune's rate after 10 warm-up steps (on 2 cores about 150 steps fit), stopped
# after 15 minutes of training so the night stays a night (GUR-Small from scratch is a `gur train` job for a
# GPU: docs/gpu.md). `[train] options` override each.
GUR_NIGHT = {"pooling": "mean", "lr": 3e-5, "temperature": 0.05, "warmup_steps": 10, "max_minutes": 15.0}
BODY_WORDS = 30  # StackOverflow titles: 9 words on median, one sentence; a manual's section: 100 or more
SAMPLE = 2000  # records read to decide (the first ones of the training side's files, in name order)


@dataclass(frozen=True)
class Shape:
    records: int  # sampled
    with_body: int
    median_words: int

    @property
    def long_documents(self) -> bool:
        return self.records > 0 and 2 * self.with_body >= self.records


def has_body(text: str) -> bool:
    return len(text.split()) >= BODY_WORDS and len(split_sentences(text)) >= 2


def corpus_shape(texts: list[str]) -> Shape:
    words = sorted(len(t.split()) for t in texts)
    return Shape(len(texts), sum(has_body(t) for t in texts), words[len(words) // 2] if words else 0)


def sample_texts(corpus: CorpusConfig, limit: int = SAMPLE) -> list[str]:
    """The text of the first `limit` records of the corpus the night trains on (a `CorpusConfig`: the training
    mirror's JSON Lines, or the user's folder), read by ingest's readers; rejects are skipped."""
    texts: list[str] = []
    for item in read_corpus(Path(corpus.path), corpus.reader()):
        if isinstance(item, Record):
            texts.append(item.text)
            if len(texts) >= limit:
                break
    return texts


def choose_method(shape: Shape) -> tuple[str, str]:
    """(method, why) for `auto`."""
    seen = (
        f"{shape.with_body:,} of {shape.records:,} sampled records have a body (2+ sentences, {BODY_WORDS}+ words; "
        f"median {shape.median_words} words)"
    )
    if shape.long_documents:
        return "documents", f"method auto -> documents: {seen}"
    return "tfcsg", f"method auto -> tfcsg (short texts): {seen}"


def resolve_method(train: TrainSection, corpus: CorpusConfig) -> TrainSection:
    """`method = "auto"`: the training section with the recipe for the corpus's shape, said in one line. Given
    the training side, so the held-out records never decide it."""
    if train.method != "auto":
        return train
    method, why = choose_method(corpus_shape(sample_texts(corpus)))
    print(why)
    return replace(train, method=method)


def documents_gur_share(train: TrainSection) -> float:
    """The share of a documents candidate's batches that are GUR's pairs: `[train] options`, else the preset's."""
    return float(train.options.get("gur_share", DOCUMENT_PRESETS["cpu"].get("gur_share", 0.0)))
