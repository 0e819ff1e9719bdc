"""`<root>/.builds.lock`: flows that read or write stage outputs share it; `gur gc` holds it alone.

Any number of builds, trainings and evaluations run side by side (a shared `flock`); `gur gc` takes it
exclusively, so a gc and a build on one root never interleave: a build started during a gc waits for
it, and a gc started during a build waits for the build (or gives up after `wait_s`, naming why). An OS
lock: a killed holder never leaves it stale.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from storage.locks import LockBusy, file_lock

LOCK = ".builds.lock"


class RootBusy(RuntimeError):
    """A build holds the data root (gc) or a gc does (a build that would not wait)."""


@contextmanager
def builds_lock(root: Path, exclusive: bool = False, wait_s: float = 3600.0, what: str = "") -> Iterator[None]:
    """Hold the lock for the block: shared for a flow, exclusive for gc; waits up to `wait_s` seconds."""
    root = Path(root)

    def waiting() -> None:
        print(f"{root}: waiting for {'builds' if exclusive else 'gur gc'} to finish ({LOCK})", flush=True)

    def refused(_: LockBusy) -> RootBusy:
        holder = "a build, training or evaluation" if exclusive else "gur gc"
        return RootBusy(f"{root}: {holder} holds the data root; {what or 'try again when it ends'}")

    with file_lock(root / LOCK, shared=not exclusive, wait_s=wait_s, waiting=waiting, refused=refused):
        yield


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
