"""The Prefect server `gur` runs flows against: a local one started by `gur server start`, else the ephemeral one.

`gur server start` runs `prefect server start` in the background on 127.0.0.1 and records its pid and API URL
in `<PREFECT_HOME>/gur-server.json`; every later `gur` command that finds it healthy uses it (no server
start per command). Without one, each command starts Prefect's ephemeral server, under an exclusive
`flock` on `<PREFECT_HOME>/gur-server.lock` until it answers: a first start migrates the database, and two
first runs migrating one SQLite file at once both fail.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from models.training.process import alive
from storage.locks import file_lock

RECORD = "gur-server.json"
LOCK = "gur-server.lock"
LOG = "gur-server.log"
EPHEMERAL_LOG = "temporary-server.log"
EPHEMERAL_LOG_MAX_BYTES = 1 << 20
START_TIMEOUT_S = 180.0


def prefect_home() -> Path:
    """Prefect's home as Prefect resolves it for this process, without importing Prefect: $PREFECT_HOME,
    else `home` in ./prefect.toml (relative to the working directory, as Prefect reads it), else ~/.prefect."""
    if os.environ.get("PREFECT_HOME"):
        return Path(os.environ["PREFECT_HOME"]).expanduser()
    toml = Path("prefect.toml")
    if toml.is_file():
        try:
            home = tomllib.loads(toml.read_text(encoding="utf-8")).get("home")
        except (tomllib.TOMLDecodeError, OSError):
            home = None
        if home:
            return Path(home).expanduser().resolve()
    return Path("~/.prefect").expanduser()


def state_home() -> Path:
    """Where `gur server start` also records its server for every working directory: $GUR_STATE_HOME, else
    $XDG_STATE_HOME/gur, else ~/.local/state/gur. (Prefect's home follows the working directory's
    prefect.toml, so a record only there is not found from another folder.)"""
    if os.environ.get("GUR_STATE_HOME"):
        return Path(os.environ["GUR_STATE_HOME"]).expanduser()
    return Path(os.environ.get("XDG_STATE_HOME") or "~/.local/state").expanduser() / "gur"


def healthy(api_url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url.rstrip('/')}/health", timeout=timeout) as response:
            return response.status == 200
    except OSError:
        return False


def read_record(home: Path | None = None) -> dict | None:
    """The server record of Prefect's home, else (no `home` given) the user's record from any folder."""
    for folder in [home] if home else [prefect_home(), state_home()]:
        try:
            return json.loads((folder / RECORD).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
    return None


def running_server(home: Path | None = None) -> str | None:
    """The API URL of the server `gur server start` started, when it is still up and answering."""
    for folder in [home] if home else [prefect_home(), state_home()]:
        record = read_record(folder)
        if record and is_prefect_server(record["pid"]) and healthy(record["api_url"]):
            return record["api_url"]
    return None


@contextmanager
def start_lock(home: Path) -> Iterator[None]:
    """One server start (and database migration) at a time per Prefect home."""
    with file_lock(home / LOCK, wait_s=math.inf):
        yield


def start_ephemeral(home: Path) -> None:
    """Start Prefect's ephemeral server for this process now, under `start_lock`; the Prefect client then
    reuses it (it is a per-process singleton) and stops it when the process exits. Its own output goes to
    `<PREFECT_HOME>/temporary-server.log`, not the command's terminal: stopped mid-request (Ctrl-C, SIGTERM)
    it logs a cancelled database rollback, a traceback that is not the user's error."""
    from prefect.server.api.server import SubprocessASGIServer

    log = home / EPHEMERAL_LOG
    with start_lock(home), server_in_own_session(log):
        try:
            SubprocessASGIServer().start()
        except RuntimeError as exc:
            raise RuntimeError(f"{exc} (the server's output: {log})") from exc


def _die_with_parent() -> None:  # runs in the forked child, before exec
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: SIGTERM when the gur process is gone, even after kill -9


_LIBC = None
if sys.platform.startswith("linux"):
    import ctypes
    import ctypes.util

    _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


@contextmanager
def server_in_own_session(log: Path) -> Iterator[None]:
    """While Prefect starts its ephemeral server: the server gets its own session, so a terminal's Ctrl-C
    reaches gur (which reports its runs Crashed through the server, then stops it) and not the server first;
    on Linux it also gets SIGTERM when gur dies, so a killed gur leaves no server behind. Its stdout and
    stderr are appended to `log` (moved to `log.1` once past 1 MiB, so a year of nights stays small)."""
    import types

    import prefect.server.api.server as server_module

    real = server_module.subprocess
    log.parent.mkdir(parents=True, exist_ok=True)
    if log.exists() and log.stat().st_size > EPHEMERAL_LOG_MAX_BYTES:
        os.replace(log, log.with_name(log.name + ".1"))

    def popen(*args, **kwargs):
        with open(log, "ab") as out:  # the child keeps its own descriptor
            kwargs.setdefault("stdout", out)
            kwargs.setdefault("stderr", subprocess.STDOUT)
            return real.Popen(*args, start_new_session=True, preexec_fn=_die_with_parent, **kwargs)

    server_module.subprocess = types.SimpleNamespace(**{**vars(real), "Popen": popen})
    try:
        yield
    finally:
        server_module.subprocess = real


def port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def start_server(port: int = 4200, host: str = "127.0.0.1", timeout: float = START_TIMEOUT_S) -> dict:
    """Start `prefect server start` in the background (its own session, output in `gur-server.log`), wait until
    it answers, record it. A server already recorded and running is returned as it is."""
    home = prefect_home()
    with start_lock(home):
        record = read_record(home)
        if record and is_prefect_server(record["pid"]) and healthy(record["api_url"]):
            return {**record, "already": True}
        if not port_free(host, port):
            raise OSError(f"port {port} on {host} is in use; pick another with --port")
        log = open(home / LOG, "ab")
        env = {**os.environ, "PREFECT_HOME": str(home)}
        env.pop("PREFECT_API_URL", None)
        cmd = [sys.executable, "-m", "prefect", "server", "start", "--host", host, "--port", str(port)]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        api_url = f"http://{host}:{port}/api"
        record = {"pid": proc.pid, "api_url": api_url, "ui_url": f"http://{host}:{port}", "log": str(home / LOG)}
        deadline = time.monotonic() + timeout
        while not healthy(api_url, timeout=1.0):
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_process(proc.pid)
                raise RuntimeError(f"prefect server did not start (exit {proc.poll()}); see {home / LOG}")
            time.sleep(0.5)
        for folder in (home, state_home()):  # the user's record: found from any working directory
            folder.mkdir(parents=True, exist_ok=True)
            (folder / RECORD).write_text(json.dumps(record, indent=1), encoding="utf-8")
        return record


def stop_process(pid: int, wait_s: float = 15.0) -> None:
    """SIGTERM to the server's process group (it was started in its own session), SIGKILL after `wait_s`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    return
            except ChildProcessError:  # not our child: poll for its end
                if not alive(pid):
                    return
            time.sleep(0.2)


def is_prefect_server(pid: int) -> bool:
    """The process is a `prefect server start` (not another process that reused a recorded pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return alive(pid)  # no /proc (macOS): trust the record
    return b"prefect" in cmdline and b"server" in cmdline and b"start" in cmdline


def stop_server() -> dict | None:
    """Stop the recorded server; None when none was recorded."""
    record = read_record()
    if record is None:
        return None
    if is_prefect_server(record["pid"]):
        stop_process(record["pid"])
    for folder in (prefect_home(), state_home()):
        path = folder / RECORD
        if (read_record(folder) or {}).get("pid") == record["pid"]:
            path.unlink(missing_ok=True)
    return record
