"""A real `gur train` stopped by SIGTERM or Ctrl-C (SIGINT to its process group, as a terminal sends it), or its
trainer alone stopped by SIGINT:
the trainer saves a checkpoint, the flow run ends Crashed (not Running), the ephemeral server is gone, gur
exits within seconds with one line saying how to resume, and (after SIGTERM) the rerun resumes from the checkpoint."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from samples.train_shards import write_demo_shards  # noqa: E402
from tests.helpers.servers import fresh_prefect_home  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
OPTIONS = dict(
    vocab_size=500,
    tokenizer_sample=2000,
    short_batch=4,
    long_batch=4,
    shuffle_buffer=64,
    log_every=1,
    eval_every=1000,
    heldout_fraction=0.2,
    ckpt_every=1000,
    ckpt_every_s=0,
    warmup_steps=2,
    threads=1,
    export=False,
)


def servers_of(home: Path) -> list[int]:
    """Pids of live processes started with PREFECT_HOME=home other than pytest (gur, its server, the trainer)."""
    marker = f"PREFECT_HOME={home}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if marker in (proc / "environ").read_bytes().split(b"\0"):
                    pids.append(int(proc.name))
            except OSError:
                continue
    return pids


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def train_until_a_step(tmp_path: Path, root: Path, home: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PREFECT_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env.pop("PREFECT_API_URL", None)
    cmd = [sys.executable, "-m", "gur_cli", "--root", str(root), "train", "--preset", "tiny", "--steps", "100000"]
    cmd += ["--lr", "1e-3", "--options", json.dumps(OPTIONS)]
    start = log.stat().st_size if log.exists() else 0
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + 400
    while "train: step " not in log.read_bytes()[start:].decode(errors="replace"):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.5)
    return proc


def flow_run_states(home: Path) -> list[str]:
    with sqlite3.connect(home / "prefect.db") as db:
        return [row[0] for row in db.execute("SELECT state_type FROM flow_run ORDER BY created")]


@pytest.mark.slow
@pytest.mark.soak  # in the default tier: the trainer's own checkpoint on a signal, kill -9 of gur stops the trainer
@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C", "the trainer alone"])
def test_a_stopped_gur_train_checkpoints_marks_the_run_crashed_and_resumes(tmp_path, how, migrated_prefect_db):
    root, home = tmp_path / "data", fresh_prefect_home(tmp_path / "prefect-home", migrated_prefect_db)
    write_demo_shards(root / "shuffle" / "demo", max_docs=30, max_pairs_per_doc=20, row_group_rows=64)
    log = tmp_path / "gur.log"
    proc = train_until_a_step(tmp_path, root, home, log)
    stopped_at = time.monotonic()
    if how == "SIGTERM":
        proc.send_signal(signal.SIGTERM)  # gur only, as a supervisor or `kill` sends it
    elif how == "Ctrl-C":
        os.killpg(proc.pid, signal.SIGINT)  # gur and the trainer, as a terminal's Ctrl-C
    else:  # gur sees no signal, only its trainer stopping with a checkpoint: a stop, not a failure
        (trainer,) = [pid for pid in servers_of(home) if b"models.training.loop" in cmdline(pid)]
        os.kill(trainer, signal.SIGINT)
    code = proc.wait(timeout=60)
    took = time.monotonic() - stopped_at
    text = log.read_text(encoding="utf-8")
    assert code == (143 if how == "SIGTERM" else 130), text
    assert took < 30, text  # seconds: the step, the checkpoint, the run's state, the server's stop
    assert "checkpoint saved" in text and "Traceback" not in text
    assert (home / "temporary-server.log").exists()  # the server's own output, off the terminal
    gur_lines = [line for line in text.splitlines() if line.startswith("gur:")]
    assert gur_lines == [
        "gur: stopped; rerun the same command to resume (finished stages and the last checkpoint are kept)"
    ]
    (run,) = list((root / "train").iterdir())
    assert list((run / "checkpoints").glob("step-*.pt")), text
    gone_by = time.monotonic() + 2
    while servers_of(home) and time.monotonic() < gone_by:
        time.sleep(0.1)
    assert servers_of(home) == []  # no ephemeral server (nor trainer) left behind 2 s later
    assert flow_run_states(home) == ["CRASHED"]
    if how != "SIGTERM":
        # every stop saved a checkpoint (above), and a resume reads it whichever signal stopped the run
        # (models/test_train_loop.py resumes after Ctrl-C): one case pays for the second `gur train`
        return

    first = len(log.read_bytes())
    again = train_until_a_step(tmp_path, root, home, log)  # resumes from the checkpoint, then stop it again
    assert "train: resum" in log.read_bytes()[first:].decode(), log.read_text()
    again.send_signal(signal.SIGTERM)
    assert again.wait(timeout=60) == 143
