"""A WordPiece vocabulary learned by BPE merges, deterministically.

`tokenizers`' WordPieceTrainer (0.23) learns the same kind of vocabulary (BPE merges over the pre-tokenized
words, `##` on every symbol but a word's first), but numbers the `##` symbols in hash-map order, and those
numbers break ties between merges of equal count: the same texts give another vocabulary in each process
(huggingface/tokenizers#1794). Here every tie is broken by fixed numbers: special tokens, then the
alphabet sorted, then the `##` symbols sorted, then merges in the order made; of pairs with the same count
the one with the smaller numbers wins (the trainer's own rule, on numbers that no longer move).
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from itertools import pairwise

PREFIX = "##"


def learn_vocab(words: Counter, vocab_size: int, min_frequency: int, special: list[str]) -> list[str]:
    """Tokens in id order: `special`, the alphabet, the `##` symbols, then merged tokens until `vocab_size` or
    until the most frequent pair occurs fewer than `min_frequency` times. `words`: pre-tokenized word counts."""
    ordered = sorted(words.items())  # a fixed order whatever the caller's dict (and PYTHONHASHSEED) did
    alphabet = sorted({c for w, _ in ordered for c in w})
    tails = sorted({PREFIX + c for w, _ in ordered for c in w[1:]})
    tokens = list(dict.fromkeys([*special, *alphabet, *tails]))
    ids = {t: i for i, t in enumerate(tokens)}
    symbols = [[ids[w[0]], *(ids[PREFIX + c] for c in w[1:])] for w, _ in ordered]
    counts = [n for _, n in ordered]
    pairs: Counter = Counter()
    where: dict[tuple[int, int], set[int]] = defaultdict(set)
    for i, word in enumerate(symbols):
        for pair in pairwise(word):
            pairs[pair] += counts[i]
            where[pair].add(i)
    heap = [(-n, pair) for pair, n in pairs.items()]
    heapq.heapify(heap)
    while len(tokens) < vocab_size and heap:
        neg, pair = heapq.heappop(heap)
        if pairs.get(pair, 0) != -neg or -neg <= 0:
            continue  # a stale entry: the pair's count changed since it was pushed
        if -neg < min_frequency:
            break
        a, b = tokens[pair[0]], tokens[pair[1]]
        merged = a + b[len(PREFIX) :] if b.startswith(PREFIX) else a + b
        if merged not in ids:
            ids[merged] = len(tokens)
            tokens.append(merged)
        new = ids[merged]
        changed: set[tuple[int, int]] = set()
        for i in sorted(where.pop(pair)):
            old = symbols[i]
            word = _merge(old, pair, new)
            if word == old:
                continue
            for p in pairwise(old):
                pairs[p] -= counts[i]
                changed.add(p)
            for p in pairwise(word):
                pairs[p] += counts[i]
                where[p].add(i)
                changed.add(p)
            symbols[i] = word
        pairs.pop(pair, None)
        for p in changed:
            if p != pair and pairs[p] > 0:
                heapq.heappush(heap, (-pairs[p], p))
    return tokens


def _merge(word: list[int], pair: tuple[int, int], new: int) -> list[int]:
    """`word` with every occurrence of `pair`, left to right, replaced by `new`."""
    out: list[int] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == pair[0] and word[i + 1] == pair[1]:
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out
