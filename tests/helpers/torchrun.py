"""Test helper: `models.training.loop` on two CPU processes under torchrun (gloo), one thread each.

A timeout kills the whole process group: torchrun's ranks too, which a plain `subprocess.run`
timeout would leave running (and taking the cores) after the test has failed.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_two_ranks(config: Path, timeout_s: float = 300) -> subprocess.CompletedProcess:
    """Train the TrainConfig JSON at `config` on 2 ranks; the finished process (output captured)."""
    from tasks.train.task import launch_command  # the command `gur train --nproc 2` runs

    cmd = launch_command(config, 2)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    with subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
