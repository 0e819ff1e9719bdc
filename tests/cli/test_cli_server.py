"""Start-up: two first runs on a fresh Prefect home both succeed (the ephemeral server starts under a lock);
`gur server start` runs one server that later commands use, `stop` stops it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TEXT = "The quick brown fox number {i} jumps over the lazy dog. The quick brown fox number {i} runs past the lazy dog."


def tiny_corpus(path: Path) -> Path:
    lines = [json.dumps({"id": i, "title": f"Doc {i}", "text": TEXT.format(i=i)}) for i in range(6)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def gur(tmp_path: Path, *argv: str, cwd: Path | None = None) -> subprocess.Popen:
    """`gur` with its own Prefect home and user state; `cwd`: another folder, whose Prefect home is another."""
    home = tmp_path / "prefect-home" if cwd is None else cwd / ".prefect"
    env = {**os.environ, "PYTHONPATH": str(REPO), "PREFECT_HOME": str(home), "GUR_STATE_HOME": str(tmp_path / "state")}
    env.pop("PREFECT_API_URL", None)
    cmd = [sys.executable, "-m", "gur_cli", *argv]
    return subprocess.Popen(
        cmd, cwd=cwd or tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def finish(proc: subprocess.Popen, timeout: float = 400) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out
    return out


@pytest.mark.soak
@pytest.mark.slow
def test_two_first_runs_at_once_on_a_fresh_prefect_home_both_succeed(tmp_path):
    corpus = tiny_corpus(tmp_path / "tiny.jsonl")
    runs = [gur(tmp_path, "--root", f"r{n}", "build-pairs", str(corpus), "--workers", "1") for n in (1, 2)]
    for proc in runs:
        assert "rows_out=" in finish(proc)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.soak
@pytest.mark.slow
def test_gur_server_start_is_used_by_later_commands(tmp_path):
    port = free_port()
    try:
        started = finish(gur(tmp_path, "server", "start", "--port", str(port)))
        assert f"API http://127.0.0.1:{port}/api" in started
        assert "already running" in finish(gur(tmp_path, "server", "start", "--port", str(port)))
        assert f"127.0.0.1:{port}/api" in finish(gur(tmp_path, "server", "status"))
        elsewhere = tmp_path / "elsewhere"  # another working directory, another Prefect home: the same server
        elsewhere.mkdir()
        assert f"127.0.0.1:{port}/api" in finish(gur(tmp_path, "server", "status", cwd=elsewhere))
        out = finish(gur(tmp_path, "--root", "r", "build-pairs", str(tiny_corpus(tmp_path / "tiny.jsonl"))))
        assert "rows_out=" in out and "temporary server" not in out
    finally:
        stopped = finish(gur(tmp_path, "server", "stop"))
    assert "stopped the Prefect server" in stopped
    status = gur(tmp_path, "server", "status")
    assert "no server started by gur" in status.communicate(timeout=60)[0] and status.returncode == 3


SERVER_FDS = """
import os, sys
from pathlib import Path
from deployments.local_server import start_ephemeral
from prefect.server.api.server import SubprocessASGIServer
start_ephemeral(Path(sys.argv[1]))
(server,) = [s for s in SubprocessASGIServer._instances.values() if s.server_process]
pid = server.server_process.pid
print(os.readlink(f"/proc/{pid}/fd/1"), os.readlink(f"/proc/{pid}/fd/2"), os.getsid(pid) == pid)
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the server's descriptors from /proc")
def test_the_temporary_servers_output_goes_to_its_log_in_prefect_home(tmp_path, migrated_prefect_db):
    """Stopped mid-request, the ephemeral server logs a cancelled rollback with a traceback: that belongs in
    its log, not on the terminal of the `gur` command that was stopped. A log past 1 MiB is moved aside."""
    from tests.helpers.servers import fresh_prefect_home

    home = fresh_prefect_home(tmp_path / "home", migrated_prefect_db)
    old = "x" * (1 << 20) + "\n"
    (home / "temporary-server.log").write_text(old)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PREFECT_HOME": str(home)}
    env.pop("PREFECT_API_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", SERVER_FDS, str(home)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    out, err, own_session = done.stdout.split()
    log = str(home / "temporary-server.log")
    assert (out, err, own_session) == (log, log, "True")
    assert (home / "temporary-server.log.1").read_text() == old
    assert (home / "temporary-server.log").stat().st_size < 1 << 20
