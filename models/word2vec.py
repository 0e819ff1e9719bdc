"""Word2vec vectors trained here, reproducibly: the same sentences give the same vectors in every process.

Both word-vector baselines use it: the evaluation's `word2vec` model (`tasks/evaluate/models.py`,
skip-gram on a corpus) and the STS survey's `sg` / `cbow` families (`tasks/sts/families.py`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from storage.progress import Progress, current_logger


@dataclass(frozen=True)
class Word2VecConfig:
    """Skip-gram (`sg=1`, the best word-vector model in the STS survey) or CBOW (`sg=0`), fitted by gensim
    with one worker: more workers make the result depend on thread timing."""

    vector_size: int = 100
    window: int = 5
    min_count: int = 2
    epochs: int = 10
    sg: int = 1
    seed: int = 0


def stable_hash(text: str) -> int:
    """gensim seeds each word's initial vector with `hashfxn(word + seed)`; Python's `hash` is salted per process."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def train_word2vec(sentences: list[list[str]], config: Word2VecConfig) -> tuple[np.ndarray, dict[str, int]]:
    """(vectors (V, vector_size), word -> row) of a word2vec model fitted on token lists; logs epochs done
    and an ETA at most every `storage.progress.LOG_EVERY_S` (a fit lasts long enough, even on the demo corpus, to
    look stuck without them)."""
    from gensim.models import Word2Vec
    from gensim.models.callbacks import CallbackAny2Vec

    class EpochDone(CallbackAny2Vec):
        def on_epoch_end(self, model: Word2Vec) -> None:
            progress.update(1)

    with Progress("word2vec", config.epochs, current_logger(__name__), unit="epochs", heartbeat=True) as progress:
        model = Word2Vec(
            sentences,
            vector_size=config.vector_size,
            window=config.window,
            min_count=config.min_count,
            sg=config.sg,
            epochs=config.epochs,
            seed=config.seed,
            workers=1,
            hashfxn=stable_hash,
            callbacks=[EpochDone()],
        )
        progress.close(words=len(model.wv.index_to_key))
    return model.wv.vectors.copy(), {w: i for i, w in enumerate(model.wv.index_to_key)}
