"""The night's upkeep of its root: retention at its end, and at its start when the disk is short of what a
candidate writes.

    night.state.early_gc = make_room(cfg, base, start)   # before the night writes anything
    row.update(retention(cfg, base, pending))             # after the decision, before its row

Retention is upkeep, never the night's outcome: it waits for other builds on the root, and a gc that cannot
run or fails is a note in the decision row (`gc`), the decision already taken.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from storage.builds_lock import RootBusy, builds_lock
from storage.disk_space import free_bytes, megabytes, training_space
from storage.progress import current_logger
from tasks.nightly.config import NightlyConfig
from tasks.retention.collect import collect_locked, summary

GC_WAIT_S = 600  # for other builds on the root; then the gc is skipped (the next night or `gur gc` catches up)


def retention(cfg: NightlyConfig, base: Path, pending: dict[str, str]) -> dict[str, Any]:
    """The night's gc (`[retention]`, tasks/retention/): the decision row's `gc` and `gc_freed_bytes`. `pending`:
    the night's candidate and its verdict, not yet in the promotions table."""
    if not cfg.retention.apply:
        return {"gc": "off ([retention] apply = false)"}
    try:
        with builds_lock(base, exclusive=True, wait_s=GC_WAIT_S, what="the night skipped its gc"):
            result = collect_locked(base, cfg.retention.config(), True, pending)
    except RootBusy as exc:
        return {"gc": f"skipped: {exc}"}
    except Exception as exc:  # the night's decision stands (a promotion is already made): gc is only upkeep
        current_logger(__name__).warning(
            "retention failed, the night's decision stands; `gur gc --apply` retries it: %s: %s",
            type(exc).__name__,
            exc,
        )
        return {"gc": f"failed: {type(exc).__name__}: {exc}"[:500]}
    print(f"retention: {summary(result)}")
    return {"gc": summary(result), "gc_freed_bytes": result.freed}


def make_room(cfg: NightlyConfig, base: Path, start: str) -> dict[str, Any]:
    """Retention at the start of a night when the disk holding the root has less free space than a candidate
    writes (`training_space`): a full disk otherwise stops the night in its data stages or its training, and
    retention only runs at its end. Returns what it did as `retention` does (`{}`: it did not run)."""
    need, free = training_space(start), free_bytes(base)
    if free >= need:
        return {}
    low = f"low on space: {megabytes(free)} free on the disk holding {base}; a candidate writes {megabytes(need)}"
    if not cfg.retention.apply:
        print(f"{low}, and [retention] apply is off: training may run out of space")
        return {}
    print(f"{low}: retention runs first")
    done = retention(cfg, base, {})
    if (left := free_bytes(base)) < need:
        print(f"still {megabytes(left)} free after retention: the night may run out of space")
    return done
