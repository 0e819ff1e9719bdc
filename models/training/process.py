"""The trainer process's ties to its run folder and to the `gur` process that started it.

- One trainer per run folder: the first rank holds an exclusive `flock` on
  `<out_dir>/.trainer.lock` (released by the kernel when the process dies, however it dies), so
  a second launch on the same folder, or a trainer left over from a killed `gur`, is named
  instead of two processes writing one checkpoints folder.
- The trainer dies with its parent: a watchdog thread notices when the `gur` process that
  launched it (`GUR_PARENT_PID`) is gone, even after `kill -9`, and stops the loop the way
  SIGTERM does (finish the step, save a checkpoint, exit).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from storage.locks import LockBusy, file_lock
from storage.locks import lock_holder as held_by

LOCK_NAME = ".trainer.lock"  # hidden: not part of the stage's output inventory
PARENT_ENV = "GUR_PARENT_PID"


class TrainerRunningError(RuntimeError):
    pass


def lock_holder(out_dir: Path) -> int | None:
    """The pid of a live trainer holding `out_dir`'s lock, or None."""
    text = held_by(Path(out_dir) / LOCK_NAME)
    if text is None:
        return None
    return int(text) if text.isdigit() else -1


@contextmanager
def run_lock(out_dir: Path) -> Iterator[None]:
    """Hold `out_dir`'s trainer lock while training, or raise naming the trainer that has it."""

    def refused(busy: LockBusy) -> TrainerRunningError:
        pid = busy.holder or "?"
        return TrainerRunningError(
            f"another trainer (pid {pid}) is still running on {out_dir}; wait for it or stop it (kill {pid})"
        )

    with file_lock(Path(out_dir) / LOCK_NAME, owner=str(os.getpid()), refused=refused):
        yield


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_gone = threading.Event()


def parent_gone() -> None:
    """Stop like SIGTERM (finish the step, checkpoint, exit), with output going nowhere: our stdout
    is a pipe to the dead parent, and a print would raise BrokenPipeError before the checkpoint."""
    if _gone.is_set():
        return
    _gone.set()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.kill(os.getpid(), signal.SIGTERM)


class _GuardedStream:
    """sys.stdout / sys.stderr: a write to the dead parent's pipe stops the run instead of crashing it."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            parent_gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            parent_gone()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def watch_parent(interval_s: float = 1.0) -> threading.Thread | None:
    """Stop like SIGTERM when the launching `gur` process is gone (None when not launched by one)."""
    pid = int(os.environ.get(PARENT_ENV, "0") or 0)
    if pid <= 0:
        return None
    if not isinstance(sys.stdout, _GuardedStream):
        sys.stdout, sys.stderr = _GuardedStream(sys.stdout), _GuardedStream(sys.stderr)

    def run() -> None:
        while not _gone.wait(interval_s):
            if not alive(pid):
                parent_gone()
                return

    thread = threading.Thread(target=run, name="gur-parent-watchdog", daemon=True)
    thread.start()
    return thread
