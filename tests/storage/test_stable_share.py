"""The one held-out hash: the nightly suite's split and a training run's held-out keys read it, and both keep
the sides their own hashes gave before they shared it (a root's suite and a run's held-out pairs keep their
members)."""

from __future__ import annotations

import hashlib
import random

from models.gur.pair_data import is_heldout
from storage.stable_share import in_share, place
from tasks.evaluate.overlap import normalize
from tasks.nightly.holdout import held_out


def _reference(key: str) -> float:
    """The formula each caller wrote out before: blake2b, 8 bytes, big-endian, over 2**64."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big") / 2**64


def _keys(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = "abc xyzÄé\u00a0.,!?\t"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(n)]


def test_place_is_the_reference_hash_and_shares_nest():
    keys = _keys(2000, 0)
    assert [place(k) for k in keys] == [_reference(k) for k in keys]
    for small, large in ((0.1, 0.2), (0.2, 0.5), (0.5, 1.0)):
        inside = {k for k in keys if in_share(k, small)}
        assert inside <= {k for k in keys if in_share(k, large)}
    assert not any(in_share(k, 0) for k in keys) and all(in_share(k, 1) for k in keys)
    assert abs(sum(in_share(k, 0.3) for k in set(keys)) / len(set(keys)) - 0.3) < 0.05


def test_the_nightly_split_and_the_run_split_keep_their_sides():
    for key in _keys(1000, 1):
        for seed in (0, 7):
            night = _reference(f"{seed}\x00{normalize(key)}") < 0.25
            assert held_out(key, 0.25, seed) == night
            assert is_heldout(key, 0.2, seed) == (_reference(f"{seed}:{key}") < 0.2)
        assert not is_heldout(key, 0.0) and not held_out(key, 0.0, 0)
