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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nightly_soak as soak  # noqa: E402

GUR = Path(sys.executable).parent / "gur"


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    work, nights = Path(sys.argv[1]), [int(n) for n in sys.argv[2:]]
    with open(soak.STACKOVERFLOW, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    for n in nights:
        soak.add_night(work / "corpus", rows, n, 2000, 20)
        options = ["--text-field", "title", "--title-field", "", "--workers", "1"]
        for command, extra in (("build-pairs", []), ("mine-keywords", ["--k", "20"])):
            before, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            cmd = [str(GUR), "--root", str(work / "data"), command, str(work / "corpus"), *options, *extra]
            done = subprocess.run(cmd, capture_output=True, text=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            print(
                f"night {n}: gur {command} rc {done.returncode}, {cpu:.1f} CPU s, "
                f"{time.perf_counter() - wall:.1f} s wall",
                flush=True,
            )
            if done.returncode:
                print(done.stderr[-2000:])
                return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
