"""A set of 64-bit keys that costs 8 bytes a key: duplicate tracking on huge corpora.

A Python set of doc_id strings costs well over 100 bytes a document (gigabytes for the
ids and titles of a full Wikipedia dump). Here new keys go to a small Python set; every
`buffer` keys it is merged into one sorted uint64 array (a merge of two sorted runs, linear
with numpy's stable sort), and lookups binary-search that array. No compiled code, so no JIT
runtime in every process that imports ingest.
"""

from __future__ import annotations

import numpy as np


class SeenKeys:
    """`add(key)` is True the first time a key (an int in [0, 2**64)) is seen."""

    def __init__(self, buffer: int = 1 << 18) -> None:
        self._sorted = np.zeros(0, dtype=np.uint64)
        self._recent: set[int] = set()
        self._buffer = buffer

    def __len__(self) -> int:
        return len(self._sorted) + len(self._recent)

    def __contains__(self, key: int) -> bool:
        if key in self._recent:
            return True
        i = int(np.searchsorted(self._sorted, np.uint64(key)))
        return i < len(self._sorted) and int(self._sorted[i]) == key

    def add(self, key: int) -> bool:
        if key in self:
            return False
        self._recent.add(key)
        if len(self._recent) >= self._buffer:
            self._flush()
        return True

    def add_many(self, keys: np.ndarray) -> np.ndarray:
        """`add` over an array at once: True where a key is new, for its first occurrence in `keys` only.

        The set's keys go into the array first; then one vectorised lookup and one merge of the new keys
        (numpy's stable sort of two sorted runs is linear), where `add` costs a Python call per key."""
        keys = np.asarray(keys, dtype=np.uint64)
        self._flush()
        _, first = np.unique(keys, return_index=True)
        new = np.zeros(len(keys), dtype=bool)
        new[first] = True
        if len(self._sorted):
            at = np.minimum(np.searchsorted(self._sorted, keys), len(self._sorted) - 1)
            new &= self._sorted[at] != keys
        if new.any():
            self._sorted = np.sort(np.concatenate([self._sorted, np.sort(keys[new])]), kind="stable")
        return new

    def _flush(self) -> None:
        if self._recent:
            fresh = np.fromiter(self._recent, dtype=np.uint64, count=len(self._recent))
            self._sorted = np.sort(np.concatenate([self._sorted, np.sort(fresh)]), kind="stable")
            self._recent.clear()

    @property
    def nbytes(self) -> int:
        """The array plus about 64 bytes a buffered key (set slot and int object)."""
        return self._sorted.nbytes + 64 * len(self._recent)
