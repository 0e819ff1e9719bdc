"""Recurrent siamese STS encoders: RNN, LSTM, GRU and InferSent's BiLSTM with max pooling.

Words are looked up in a vocabulary built from the training sentences (random embeddings, or
GloVe's vector where GloVe has the word); one encoder reads both sentences; the head scores
[u, v, |u - v|, u * v] (InferSent's features) with Linear-ReLU-Linear-sigmoid -> [0, 1].
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

import numpy as np
import torch
from torch import nn

CELLS = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}
PAD, UNK = 0, 1


def build_vocab(token_lists: Iterable[list[str]], min_count: int = 1) -> dict[str, int]:
    """Word -> id (0 padding, 1 unknown), most frequent first, ties alphabetical: deterministic."""
    counts = Counter(t for tokens in token_lists for t in tokens)
    words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    return {w: i + 2 for i, w in enumerate(words)}


def init_embeddings(
    vocab: dict[str, int], dim: int, seed: int, vectors: np.ndarray | None = None, index: dict[str, int] | None = None
) -> tuple[torch.Tensor, int]:
    """(len(vocab) + 2, dim) weights: N(0, 0.1) rows, GloVe's row where it knows the word; returns the hit count."""
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(len(vocab) + 2, dim, generator=gen) * 0.1
    weight[PAD] = 0.0
    hits = 0
    if vectors is not None and index is not None:
        for word, i in vocab.items():
            j = index.get(word)
            if j is not None:
                weight[i] = torch.from_numpy(np.asarray(vectors[j], dtype=np.float32))
                hits += 1
    return weight, hits


class RecurrentSiamese(nn.Module):
    """`cell` in rnn / lstm / gru: the last hidden state is the sentence vector; `infersent`: a
    BiLSTM whose hidden states are max-pooled over real tokens."""

    def __init__(
        self,
        cell: str,
        vocab: dict[str, int],
        tokenize: Callable[[str], list[str]],
        embeddings: torch.Tensor,
        hidden: int = 128,
        max_len: int = 128,
        seed: int = 0,
    ):
        super().__init__()
        torch.manual_seed(seed)
        self.vocab, self.tokenize, self.max_len, self.cell = vocab, tokenize, max_len, cell
        self.embed = nn.Embedding.from_pretrained(embeddings.clone(), freeze=False, padding_idx=PAD)
        infersent = cell == "infersent"
        rnn = nn.LSTM if infersent else CELLS[cell]
        self.rnn = rnn(embeddings.shape[1], hidden, batch_first=True, bidirectional=infersent)
        width = hidden * (2 if infersent else 1)
        self.head = nn.Sequential(nn.Linear(4 * width, hidden), nn.ReLU(), nn.Linear(hidden, 1), nn.Sigmoid())

    def ids(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T) token ids padded with 0 and (B,) lengths (at least 1: an empty sentence reads one UNK)."""
        rows = [[self.vocab.get(t, UNK) for t in self.tokenize(text)][: self.max_len] or [UNK] for text in texts]
        lengths = torch.tensor([len(r) for r in rows])
        out = torch.zeros(len(rows), int(lengths.max()), dtype=torch.long)
        for i, r in enumerate(rows):
            out[i, : len(r)] = torch.tensor(r)
        return out, lengths

    def encode(self, texts: list[str]) -> torch.Tensor:
        ids, lengths = self.ids(texts)
        packed = nn.utils.rnn.pack_padded_sequence(self.embed(ids), lengths, batch_first=True, enforce_sorted=False)
        states, last = self.rnn(packed)
        if self.cell != "infersent":
            h = last[0] if isinstance(last, tuple) else last  # LSTM returns (h, c)
            return h[-1]  # (B, H)
        padded, _ = nn.utils.rnn.pad_packed_sequence(states, batch_first=True, padding_value=float("-inf"))
        return padded.max(dim=1).values  # (B, 2H)

    def forward(self, a: list[str], b: list[str]) -> torch.Tensor:
        u, v = self.encode(a), self.encode(b)
        return self.head(torch.cat([u, v, (u - v).abs(), u * v], dim=-1)).squeeze(-1)  # (B,)
