"""Real server processes for the end-to-end tests: `BIN` (the virtualenv's scripts, `prefect` among them), a
free local port, waiting for a URL to answer 200 while its process lives, and stopping a process started in
its own session with its whole group (SIGTERM, then SIGKILL after 20 s); a fresh PREFECT_HOME with a migrated
database copied in."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, timeout: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} while waiting for {url}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(url)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def fresh_prefect_home(home: Path, migrated_db: Path) -> Path:
    """`home` as a new PREFECT_HOME whose (empty) database is already at the current schema."""
    home.mkdir(parents=True)
    shutil.copyfile(migrated_db, home / "prefect.db")
    return home
