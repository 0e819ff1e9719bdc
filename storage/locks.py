"""The one file lock every lock of the product takes: the root's builds lock, the nightly root lock, the catalog
writer's, a training run's and a Prefect home's server start.

An OS lock (`flock`) on a file: released when its holder exits or is killed, so a crash never leaves a stale
lock. A holder may write who it is into the file (`owner`), which a refused caller reads back to name it.
"""

from __future__ import annotations

import fcntl
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

POLL_S = 0.2


class LockBusy(RuntimeError):
    """The lock is held by another process; `holder` is what it wrote into the file ("" when nothing)."""

    def __init__(self, path: Path, holder: str):
        super().__init__(f"{path} is held by {holder or 'another process'}")
        self.path, self.holder = path, holder


def _read(handle) -> str:
    handle.seek(0)
    return handle.read().strip()


@contextmanager
def file_lock(
    path: Path,
    *,
    shared: bool = False,
    wait_s: float = 0.0,
    owner: str | None = None,
    waiting: Callable[[], None] | None = None,
    refused: Callable[[LockBusy], Exception] | None = None,
) -> Iterator[None]:
    """Hold `path`'s lock for the block (exclusive, or `shared`). Busy: wait up to `wait_s` seconds (0: not at
    all, `math.inf`: until it is free), calling `waiting` once when the wait begins, then raise LockBusy (or
    the caller's own error, `refused(busy)`).
    `owner`: written into the file once held (replacing what was there)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    with open(path, "a+", encoding="utf-8") as handle:
        if math.isinf(wait_s):
            fcntl.flock(handle, mode)
        else:
            deadline, said = time.monotonic() + wait_s, False
            while True:
                try:
                    fcntl.flock(handle, mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        busy = LockBusy(path, _read(handle))
                        raise (refused(busy) if refused else busy) from None
                    if waiting and not said:
                        waiting()
                        said = True
                    time.sleep(POLL_S)
        if owner is not None:
            handle.seek(0)
            handle.truncate()
            handle.write(owner)
            handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def lock_holder(path: Path) -> str | None:
    """What the holder of `path`'s lock wrote ("" when nothing), or None when nobody holds it (or no file)."""
    path = Path(path)
    if not path.exists():
        return None
    with open(path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(handle)
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None
