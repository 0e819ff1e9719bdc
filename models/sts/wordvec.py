"""Averaged word vectors, cosine: the survey's word-vector family (no training loop: cosine is the score).

The vectors are GloVe's or word2vec's trained here (`models/word2vec.py`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn


class WordVectorScorer(nn.Module):
    """Cosine of the mean vectors of each sentence's known words (0 when a side has none)."""

    def __init__(self, vectors: np.ndarray, vocab: dict[str, int], tokenize: Callable[[str], list[str]]):
        super().__init__()
        self.vectors, self.vocab, self.tokenize = np.asarray(vectors, dtype=np.float32), vocab, tokenize

    def coverage(self, texts: list[str]) -> float:
        tokens = [t for text in texts for t in self.tokenize(text)]
        return sum(t in self.vocab for t in tokens) / max(1, len(tokens))

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.vectors.shape[1]), dtype=np.float32)
        for i, text in enumerate(texts):
            ids = [j for j in (self.vocab.get(t) for t in self.tokenize(text)) if j is not None]
            if ids:
                out[i] = self.vectors[ids].mean(axis=0)
        return out

    def forward(self, a: list[str], b: list[str]) -> torch.Tensor:
        u, v = self.embed(a), self.embed(b)
        norms = np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1)
        cos = np.where(norms > 0, (u * v).sum(axis=1) / np.where(norms > 0, norms, 1.0), 0.0)
        return torch.from_numpy(cos.astype(np.float32))  # (B,)
