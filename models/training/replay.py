"""Which training rows a candidate on a grown corpus sees: what is new since the champion's data first, then a
seeded sample of the rest (a replay sample), within what its steps can show.

Two limits apply, each optional: `ratio` (`[train] replay`: at most this many older rows per new one; 0: no
such limit) and `capacity` (the rows a step-capped run shows once: the night's budget; 0: no cap). Where the
new rows alone exceed the capacity, a seeded sample of them fills it; where nothing is new (the settings
changed, not the data), every row is an older one and the ratio does not apply. The chosen rows come back in row order,
so the stream's own seeded order shuffles them as it does every row set."""

from __future__ import annotations

import numpy as np


def new_first(
    rows: np.ndarray, is_new: np.ndarray, ratio: float, capacity: int, seed: int
) -> tuple[np.ndarray, dict[str, int]]:
    """`rows` (training row numbers), `is_new` (one flag per entry of `rows`) -> (chosen rows in row order,
    counts: `new_rows`, `old_rows`, `replayed_rows`, `new_left_out`)."""
    rows, is_new = np.asarray(rows, np.int64), np.asarray(is_new, bool)
    if len(rows) != len(is_new):
        raise ValueError(f"{len(is_new)} new-row flags for {len(rows)} rows")
    if ratio < 0 or capacity < 0:
        raise ValueError(f"ratio and capacity must be >= 0, got {ratio} and {capacity}")
    rng = np.random.default_rng(seed)
    new, previous = rows[is_new], rows[~is_new]
    kept_new = new
    if capacity and len(new) > capacity:
        kept_new = rng.choice(new, size=capacity, replace=False)
    room = len(previous) if ratio == 0 or not len(new) else min(len(previous), round(ratio * len(new)))
    if capacity:
        room = min(room, capacity - len(kept_new))
    sample = rng.choice(previous, size=room, replace=False) if room else previous[:0]
    chosen = np.sort(np.concatenate([kept_new, sample]))
    counts = {
        "new_rows": len(new),
        "old_rows": len(previous),
        "replayed_rows": int(room),
        "new_left_out": len(new) - len(kept_new),
    }
    return chosen, counts


def content_digests(ids: list[str], titles: list[str], sentences: list[list[str]]) -> dict[str, str]:
    """A digest of each document's title and sentences by its id: a document is changed when its digest is."""
    import hashlib

    out = {}
    for doc_id, title, body in zip(ids, titles, sentences, strict=True):
        text = "\x1e".join([title, *body])
        out[doc_id] = hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()
    return out
