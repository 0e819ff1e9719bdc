"""A set of 64-bit keys in one flat array: duplicate tracking that stays small on huge corpora.

A Python set of doc_id strings costs well over 100 bytes a document (about 1.5 GB for the
ids and titles of a full Wikipedia dump); this open-addressing table costs 16-32 bytes a key.
Keys are hashes already, so their low bits pick the slot.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_EMPTY = np.uint64(0)  # key 0 is tracked by a flag instead


@njit(cache=True)
def _slot(table: np.ndarray, key: np.uint64) -> int:
    """Where `key` is, or the empty slot where it would go (linear probing)."""
    mask = len(table) - 1
    i = key & mask
    while table[i] != 0 and table[i] != key:
        i = (i + 1) & mask
    return i


@njit(cache=True)
def _insert(table: np.ndarray, key: np.uint64) -> bool:
    i = _slot(table, key)
    if table[i] == key:
        return False
    table[i] = key
    return True


@njit(cache=True)
def _contains(table: np.ndarray, key: np.uint64) -> bool:
    return table[_slot(table, key)] == key


@njit(cache=True)
def _rehash(old: np.ndarray, new: np.ndarray) -> None:
    for key in old:
        if key != 0:
            _insert(new, key)


class SeenKeys:
    """`add(key)` is True the first time a key is seen."""

    def __init__(self, capacity: int = 1 << 16) -> None:
        self._table = np.zeros(1 << max(4, (capacity - 1).bit_length()), dtype=np.uint64)
        self._size = 0
        self._zero = False

    def __len__(self) -> int:
        return self._size

    def __contains__(self, key: int) -> bool:
        key = np.uint64(key)
        return self._zero if key == _EMPTY else _contains(self._table, key)

    def add(self, key: int) -> bool:
        key = np.uint64(key)
        if key == _EMPTY:
            new, self._zero = not self._zero, True
        else:
            new = _insert(self._table, key)
        if new:
            self._size += 1
            if 2 * self._size > len(self._table):  # keep probes short: at most half full
                bigger = np.zeros(2 * len(self._table), dtype=np.uint64)
                _rehash(self._table, bigger)
                self._table = bigger
        return new

    @property
    def nbytes(self) -> int:
        return self._table.nbytes
