"""`<root>/.builds.lock`: flows that read or write stage outputs share it; `gur gc` holds it alone.

Any number of builds, trainings and evaluations run side by side (a shared `flock`); `gur gc` takes it
exclusively, so a gc and a build on one root never interleave: a build started during a gc waits for
it, and a gc started during a build waits for the build (or gives up after `wait_s`, naming why). An OS
lock: a killed holder never leaves it stale.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK = ".builds.lock"


class RootBusy(RuntimeError):
    """A build holds the data root (gc) or a gc does (a build that would not wait)."""


@contextmanager
def builds_lock(root: Path, exclusive: bool = False, wait_s: float = 3600.0, what: str = "") -> Iterator[None]:
    """Hold the lock for the block: shared for a flow, exclusive for gc; waits up to `wait_s` seconds."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    handle = open(root / LOCK, "a+", encoding="utf-8")
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    deadline, said = time.monotonic() + wait_s, False
    try:
        while True:
            try:
                fcntl.flock(handle, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = "a build, training or evaluation" if exclusive else "gur gc"
                    raise RootBusy(
                        f"{root}: {holder} holds the data root; {what or 'try again when it ends'}"
                    ) from None
                if not said:
                    holder = "builds to finish" if exclusive else "gur gc to finish"
                    print(f"{root}: waiting for {holder} ({LOCK})", flush=True)
                    said = True
                time.sleep(0.2)
        yield
    finally:
        handle.close()


def holds_root(fn):
    """Under `@flow`: the flow runs holding the builds lock shared (on its `root` parameter's data root)."""
    import functools
    import inspect

    from storage.layout import data_root

    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        # by name: a flow declared as `fn(**params)` (tasks/runtime/parameters.py: takes) has no positionals
        named = signature.bind_partial(*args, **kwargs).arguments
        with builds_lock(data_root(named.get("root")), what="a build waits for gur gc"):
            return fn(**named)

    return run
