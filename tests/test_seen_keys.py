"""SeenKeys against a Python set on random keys, through many merges of its buffer."""

from __future__ import annotations

import numpy as np

from tasks.ingest.seen_keys import SeenKeys


def test_matches_a_python_set_through_merges_and_edge_keys():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 2**64 - 1, size=20_000, dtype=np.uint64)
    # Repeats (before and after a merge), the smallest and largest keys, keys equal in their low bits.
    same_slot = (np.arange(1, 200, dtype=np.uint64) << np.uint64(40)) | np.uint64(7)
    extra = np.array([0, 0, 2**64 - 1, 2**64 - 1], dtype=np.uint64)
    keys = np.concatenate([keys, keys[:5000], extra, same_slot])
    rng.shuffle(keys)
    seen, reference = SeenKeys(buffer=1000), set()
    for key in keys.tolist():
        assert (key in seen) == (key in reference)
        assert seen.add(key) == (key not in reference)
        reference.add(key)
    assert len(seen) == len(reference) and 0 in seen
    assert all(k in seen for k in reference)
    assert seen.nbytes <= 8 * len(reference) + 64 * 1000  # 8 bytes a merged key
