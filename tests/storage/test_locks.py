"""storage/locks.py, the one file lock: held by another process it refuses, waits or shares as asked, and a
refused caller reads the holder's note."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage.locks import LockBusy, file_lock, lock_holder

REPO = Path(__file__).resolve().parents[2]


def hold(path: Path, seconds: float, shared: bool = False, owner: str = "other") -> subprocess.Popen:
    """Another process holding `path`'s lock for `seconds` (started once it holds it)."""
    code = (
        "import sys, time\nfrom storage.locks import file_lock\n"
        f"with file_lock({str(path)!r}, shared={shared}, owner={owner!r}):\n"
        "    print('held', flush=True)\n"
        f"    time.sleep({seconds})\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_held_lock_refuses_names_its_holder_and_is_free_when_the_holder_exits(tmp_path):
    path = tmp_path / "sub" / "x.lock"
    assert lock_holder(path) is None  # no file: nobody
    proc = hold(path, 30, owner="night 7")
    try:
        assert lock_holder(path) == "night 7"
        with pytest.raises(LockBusy, match="held by night 7") as busy, file_lock(path):
            pass
        assert busy.value.holder == "night 7"
        with pytest.raises(LockBusy), file_lock(path, shared=True, wait_s=0.3):  # an exclusive holder: no sharing
            pass
    finally:
        proc.kill()  # killed, not released: the OS drops the lock
        proc.wait()
    with file_lock(path, owner="me"):
        assert path.read_text(encoding="utf-8") == "me"
    assert lock_holder(path) is None


def test_shared_holders_share_and_a_waiter_gets_the_lock_when_it_is_released(tmp_path):
    path = tmp_path / "x.lock"
    proc = hold(path, 1.0, shared=True)
    said = []
    try:
        with file_lock(path, shared=True):  # shared with the other process: at once
            pass
        started = time.monotonic()
        with file_lock(path, wait_s=30, waiting=lambda: said.append(1)):  # exclusive: after the holder ends
            waited = time.monotonic() - started
    finally:
        proc.wait()
    assert said == [1] and 0.2 < waited < 30
