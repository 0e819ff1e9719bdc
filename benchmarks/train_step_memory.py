"""The documents recipe's training step with and without dropout on the attention probabilities: peak memory and time.

With dropout there PyTorch's CPU attention falls back to the math path, which keeps every head's T x T scores,
their softmax and the dropout mask for the backward pass; at 0 the fused (flash) kernel runs and keeps none.
This runs one night's own training run again (its `config.json`: the rung's split, GUR's pairs, the clustered
pages) for a few steps under each setting, one after the other in fresh processes, and prints the trainer's
peak resident memory, its step loop's seconds a step and its CPU seconds:

    .venv/bin/python benchmarks/train_step_memory.py \
        --config WORK/docs-100k/data/train/1beb62af72502a33/config.json --steps 30

Wall seconds on a loaded machine mislead; read the CPU seconds and the ratio of the two rows of one run.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import harness
from harness import REPO

SETTINGS = {"attention dropout 0.1 (MiniLM's)": 0.1, "attention dropout 0 (the preset)": 0.0}


def run_once(config: dict, attention_dropout: float, steps: int, work: Path) -> dict:
    """One training run of `steps` steps in a fresh process: its peak memory, step-loop seconds and CPU seconds."""
    from large_corpus import TreeMemory

    out = work / f"run-{attention_dropout:g}"
    shutil.rmtree(out, ignore_errors=True)  # a run folder kept from before would resume, not start
    run = dict(config, out_dir=str(out), max_steps=steps, epochs=0.0, attention_dropout=attention_dropout)
    run.update(eval_every=0, export=False, ckpt_every=steps, ckpt_every_s=0.0, interpolate=1.0)
    path = work / f"config-{attention_dropout:g}.json"
    path.write_text(json.dumps(run))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.time()
    with TreeMemory(every_s=0.2) as memory:
        done = subprocess.run(
            [sys.executable, "-m", "models.training.loop", "--config", str(path)],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
    if done.returncode:
        raise SystemExit(f"training failed ({done.returncode}):\n{done.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = json.loads((out / "summary.json").read_text())
    return {
        "peak_gib": memory.peak_process_bytes / 2**30,
        "step_s": summary["trained_s"] / steps,
        "cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        "wall_s": time.time() - started,
    }


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(__doc__, workdir_help="the runs' folders")
    parser.add_argument("--config", required=True, help="a documents training run's config.json (a night's)")
    parser.add_argument("--steps", type=int, default=30, help="training steps a setting (default 30)")
    args = parser.parse_args(argv)
    config = json.loads(Path(args.config).read_text())
    if config.get("method") != "documents":
        raise SystemExit(f"{args.config}: a documents run's config, not {config.get('method')!r}")
    rows, work, show = {}, harness.workdir(args), harness.Lines()
    for name, value in SETTINGS.items():
        rows[name] = r = run_once(config, value, args.steps, work)
        show(
            f"{name}: peak {r['peak_gib']:.2f} GiB, {r['step_s']:.2f} s a step (step loop, wall), "
            f"{r['cpu_s']:.0f} CPU s for the run ({r['wall_s']:.0f} s wall)"
        )
    old, new = rows.values()
    show(f"ratio (0 / 0.1): peak {new['peak_gib'] / old['peak_gib']:.2f}, step {new['step_s'] / old['step_s']:.2f}")
    title = f"The documents recipe's step with and without attention dropout ({args.steps} steps)"
    harness.record(args, title, show.lines, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
