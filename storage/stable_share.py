"""One hash for every held-out split: a key's stable place in [0, 1).

The nightly suite's records (`tasks/nightly/holdout.py`) and a training run's held-out documents and questions
(`models/gur/pair_data.py`) both keep a key when its place falls below the share: the same key is always on
the same side, on any machine, whatever order the keys arrive in, and a larger share only adds keys.
Callers build the key (a seed and the text, or a document id), so two splits of one corpus stay independent.
"""

from __future__ import annotations

import hashlib


def place(key: str) -> float:
    """blake2b(key), 8 bytes read big-endian, as a number in [0, 1)."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big") / 2**64


def in_share(key: str, share: float) -> bool:
    """Whether `key` falls in the held-out `share` (0: none, 1: all)."""
    return share > 0 and place(key) < share
