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


def test_add_many_matches_add_one_key_at_a_time():
    """The vectorised form (the folder assembly's, per shard) against a Python set, mixed with `add` calls
    whose keys sit in the buffer, with repeats inside a batch and across batches."""
    rng = np.random.default_rng(1)
    seen, reference = SeenKeys(buffer=64), set()
    for round_ in range(40):
        batch = rng.integers(0, 5000, size=int(rng.integers(0, 300)), dtype=np.uint64)  # small range: repeats
        if round_ % 3 == 0:
            for key in rng.integers(0, 5000, size=50, dtype=np.uint64).tolist():
                assert seen.add(key) == (key not in reference)
                reference.add(key)
        expected, batch_seen = [], set()
        for key in batch.tolist():
            expected.append(key not in reference and key not in batch_seen)
            batch_seen.add(key)
        assert seen.add_many(batch).tolist() == expected
        reference |= batch_seen
        assert len(seen) == len(reference)
    assert all(k in seen for k in reference) and 5001 not in seen
