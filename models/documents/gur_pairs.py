"""GUR's LCS pairs as a share of the `documents` recipe's batches.

The night's `build-pairs` mines, from every document, pairs of its sentences that share a long enough common
substring (the GUR recipe), and its shuffle stage writes them into shards (`<shards>/short|long/part-*.parquet`:
`doc_id`, `a`, `b`, ...). Title -> body pairs teach a heading to find its section; GUR's pairs teach what a
page is about (two sentences of one text find each other). Here they train the same encoder in the same
in-batch contrastive task: a `gur_share` of the training batches are batches of GUR pairs (sentence a finds
sentence b among the batch's other b's; which one is the query is a seeded coin per pair and epoch), the rest
the structure pairs (pairs.py) in their own order. The pairs' document and page are masked as negatives, as
for every pair kind.

The schedule is fixed, not drawn: global batch g is a GUR batch when floor((g + 1) * share) > floor(g * share),
so the kinds alternate evenly and a resumed run continues the same sequence. The structure pairs keep their
epochs (one epoch is still one pass over the documents), so a share s adds s / (1 - s) batches per structure
batch: `total_steps`. GUR pairs of documents unknown to the split (another build) or held out in the loop are
left out, counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.gur.pair_data import BUCKETS, bucket_files, is_heldout

GUR_SALT = 7  # the pairs' order per epoch: a seed stream of its own, apart from the structure pairs'
SWAP_SALT = 8  # which sentence of a pair is the query, per (epoch, pair)


def is_gur_batch(index: int, share: float) -> bool:
    """Global batch `index` is a batch of GUR pairs under `share` (evenly spaced, 0 <= share < 1)."""
    return _before(index + 1, share) > _before(index, share)


def _before(index: int, share: float) -> int:
    """GUR batches among the first `index` global batches."""
    return math.floor(index * share + 1e-9)


def split_index(index: int, share: float) -> tuple[bool, int]:
    """(is a GUR batch, its index among the batches of its kind) for global batch `index`."""
    gur = _before(index, share)
    return (True, gur) if is_gur_batch(index, share) else (False, index - gur)


def total_steps(structure_steps: int, share: float) -> int:
    """Global batches that hold `structure_steps` structure batches under `share`."""
    if share <= 0:
        return structure_steps
    steps = math.ceil(structure_steps / (1 - share))
    while steps > 1 and steps - 1 - _before(steps - 1, share) >= structure_steps:
        steps -= 1  # the smallest count with every structure batch in it
    return steps


def structure_steps(steps: int, share: float) -> int:
    """Structure batches among the first `steps` global batches under `share` (`total_steps`' inverse)."""
    return steps - _before(steps, share) if share > 0 else steps


@dataclass
class GurPairs:
    """The shuffle output's pairs whose document trains here: texts and the document number each belongs to."""

    a: list[str]
    b: list[str]
    documents: np.ndarray  # the document's number in the split (`Documents` order)
    unknown: int  # pairs of documents the split does not hold
    heldout: int  # pairs of documents held out in the loop

    def __len__(self) -> int:
        return len(self.a)


def load_gur_pairs(shards: str | Path, doc_numbers: dict[str, int], heldout_fraction: float, seed: int) -> GurPairs:
    """Every pair of the shuffle output `shards` (both buckets, in shard order) whose document is a training
    document of the split (`doc_numbers`: doc_id -> number; held-out ones by the same seeded hash as the
    structure pairs')."""
    import pyarrow.parquet as pq

    folder = Path(shards)
    files = [f for bucket in BUCKETS for f in bucket_files(folder, bucket)]
    if not files:
        raise FileNotFoundError(f"{folder}: no short/part-*.parquet or long/part-*.parquet (give a shuffle output)")
    out = GurPairs([], [], np.empty(0, np.int64), 0, 0)
    numbers: list[int] = []
    held: dict[str, bool] = {}
    for path in files:
        table = pq.read_table(path, columns=["doc_id", "a", "b"])
        for doc_id, a, b in zip(*(table.column(c).to_pylist() for c in ("doc_id", "a", "b")), strict=True):
            number = doc_numbers.get(doc_id)
            if number is None:
                out.unknown += 1
            elif held.setdefault(doc_id, is_heldout(doc_id, heldout_fraction, seed)):
                out.heldout += 1
            elif a and b:
                out.a.append(a)
                out.b.append(b)
                numbers.append(number)
    out.documents = np.array(numbers, np.int64)
    return out


class GurOrder:
    """Seeded batches of GUR pairs, epoch after epoch: batch j of rank r takes positions
    `j * global_batch + r * batch_size ...` of the epochs' permutations."""

    def __init__(self, pairs: GurPairs, batch_size: int, seed: int, rank: int = 0, world: int = 1):
        if not len(pairs):
            raise ValueError("no GUR pair of a training document to draw from")
        self.pairs, self.batch_size, self.seed, self.rank, self.world = pairs, batch_size, seed, rank, world
        self._cache: tuple[int, np.ndarray] | None = None

    def _order(self, epoch: int) -> np.ndarray:
        if self._cache is None or self._cache[0] != epoch:
            rng = np.random.default_rng([self.seed, epoch, GUR_SALT])
            self._cache = (epoch, rng.permutation(len(self.pairs)))
        return self._cache[1]

    def batch(self, index: int) -> list[tuple[str, str, int]]:
        """(query, passage, document number) of the rank's part of GUR batch `index`."""
        n = len(self.pairs)
        start = index * self.batch_size * self.world + self.rank * self.batch_size
        out = []
        for position in range(start, start + self.batch_size):
            epoch, row = divmod(position, n)
            pair = int(self._order(epoch)[row])
            a, b = self.pairs.a[pair], self.pairs.b[pair]
            if np.random.default_rng([self.seed, epoch, pair, SWAP_SALT]).integers(2):
                a, b = b, a
            out.append((a, b, int(self.pairs.documents[pair])))
        return out
