"""One more night on a soaked workdir, as users run it: each data command as its own process, CPU measured.

    .venv/bin/python benchmarks/nightly_process_cpu.py /tmp/soak/work 61 [62 ...]

Adds each night's file (the next 20 StackOverflow titles, in the format `benchmarks/nightly_soak.py` would
give that night) to the workdir's corpus folder, runs `gur build-pairs` and then `gur mine-keywords` (the
soak's keyword settings: K = 20) on it, each in a new process (an ephemeral Prefect server included, as
without `gur server start`), and prints the CPU seconds of each process and its children. Run it on a
10-night and a 60-night workdir to compare nights the way a scheduled job pays for them: start-up
included, which `nightly_soak.py`'s in-process figures leave out.
"""

from __future__ import annotations

import csv
import resource
import subprocess
import sys
import time
from pathlib import Path

import harness
import nightly_soak as soak

GUR = Path(sys.executable).parent / "gur"


def main() -> int:
    parser = harness.parser(__doc__, workdir=None)
    parser.add_argument("workdir", type=Path, help="a workdir of benchmarks/nightly_soak.py (its nights go on)")
    parser.add_argument("nights", type=int, nargs="+", help="the nights to add, in order")
    args = parser.parse_args()
    work, show, figures = args.workdir, harness.Lines(), []
    with open(soak.STACKOVERFLOW, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    for n in args.nights:
        soak.add_night(work / "corpus", rows, n, 2000, 20)
        options = ["--text-field", "title", "--title-field", "", "--workers", "1"]
        for command, extra in (("build-pairs", []), ("mine-keywords", ["--k", "20"])):
            before, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            cmd = [str(GUR), "--root", str(work / "data"), command, str(work / "corpus"), *options, *extra]
            done = subprocess.run(cmd, capture_output=True, text=True)
            after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter() - wall
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            show(f"night {n}: gur {command} rc {done.returncode}, {cpu:.1f} CPU s, {wall:.1f} s wall")
            figures.append({"night": n, "command": command, "rc": done.returncode, "cpu_s": cpu, "wall_s": wall})
            if done.returncode:
                print(done.stderr[-2000:])
                return 1
    title = f"A soaked root's nights {' '.join(map(str, args.nights))}, each command its own process"
    harness.record(args, title, show.lines, {"nights": figures})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
