"""How quickly a night on an unchanged corpus ends ("nothing new"), Prefect's overhead included.

    .venv/bin/python benchmarks/nightly_noop.py [--workdir WORK] [--repeat 3]

Corpus: the 16,000 StackOverflow titles; method tfcsg from MiniLM for 30 steps (the candidate's
quality is not the point here, but the gate's paired test must see its gain on the held-out share
of the titles for the first night to promote); STS-B en dev is scored and reported. Measures, wall clock:
1. the first night (ingest, keywords, train, evaluate both models, gate, promote);
2. a nothing-new night in the same process (Prefect already up);
3. a nothing-new night as a fresh `gur nightly` process, as cron would start it (ephemeral
   Prefect server start-up included), `--repeat` times.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import harness
from harness import REPO, shared_data

CONFIG = """[corpus]
path = "{corpus}"
text_field = "title"
title_field = ""

[train]
method = "tfcsg"
preset = "cpu"
steps = 30

[evaluate]
stsb = ["{stsb}"]

[gate]
margin = -1.0
guards = {{}}
"""


def main() -> None:
    parser = harness.parser(__doc__, workdir_help="holds the nights' data root (a fresh one: its first night runs)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    root = harness.workdir(args).resolve() / "data"
    root.mkdir(parents=True, exist_ok=True)
    config = root / "nightly.toml"
    config.write_text(
        CONFIG.format(corpus=shared_data("stackoverflow", "train.tsv"), stsb=shared_data("stsb", "stsb-en-dev.csv"))
    )
    from flows.nightly_retrain import nightly_retrain

    t0 = time.perf_counter()
    first = nightly_retrain(config_path=str(config), root=str(root))
    first_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = nightly_retrain(config_path=str(config), root=str(root))
    warm_s = time.perf_counter() - t0
    cold = []
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        proc = subprocess.run(
            [str(Path(sys.executable).parent / "gur"), "--root", str(root), "nightly"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
        )
        cold.append(time.perf_counter() - t0)
        if proc.returncode != 0 or "nothing-new" not in proc.stdout:
            raise SystemExit(proc.stdout[-2000:] + proc.stderr[-2000:])
    show = harness.Lines()
    show(f"first night: {first['decision']} in {first_s:.1f} s")
    show(f"nothing-new night, same process: {again['decision']} in {warm_s:.1f} s")
    show(
        f"nothing-new night, fresh `gur nightly` process: median {statistics.median(cold):.1f} s "
        f"(min {min(cold):.1f}, max {max(cold):.1f}, n={len(cold)})"
    )
    figures = {"first_s": first_s, "first": first["decision"], "same_process_s": warm_s, "fresh_process_s": cold}
    harness.record(args, "A nothing-new night: in the same process and as a fresh `gur nightly`", show.lines, figures)


if __name__ == "__main__":
    main()
