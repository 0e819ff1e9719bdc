"""A real trainer process (`python -m models.training.loop --config FILE`) stopped with Ctrl-C at a step."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def trainer_command(config_file: Path) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of a trainer process on `config_file` (run it with `cwd=REPO`)."""
    cmd = [sys.executable, "-m", "models.training.loop", "--config", str(config_file)]
    return cmd, {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


def interrupt_at_step(config_file: Path, step: int) -> list[str]:
    """Run the trainer on `config_file`, send SIGINT once it logs `step <step>`; it finishes that step, saves a
    checkpoint and exits 3 (asserted). Returns its output lines."""
    cmd, env = trainer_command(config_file)
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith(f"step {step} "):
            proc.send_signal(signal.SIGINT)
            break
    lines += proc.stdout.readlines()
    assert proc.wait(timeout=120) == 3, "".join(lines[-20:])
    return lines
