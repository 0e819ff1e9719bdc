"""The suite's command: the parts in order under their budgets, the watchdog, its entry in the results log."""

from __future__ import annotations

import dataclasses
import os
import shlex
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import harness  # benchmarks/harness.py: the results log's entries

from gpu_suite.harness import (
    GPU,
    SMOKE,
    Clock,
    Ctx,
    OverBudget,
    Part,
    SkipPart,
    environment,
    free_memory,
    markdown,
    part_state,
)
from gpu_suite.options import parser
from gpu_suite.part_sbert import part_sbert
from gpu_suite.part_scratch import part_scratch
from gpu_suite.part_tests import part_tests
from gpu_suite.part_tfcsg import part_tfcsg
from gpu_suite.part_throughput import part_throughput
from gpu_suite.settings import PARTS, RESULTS, SUITE

RUNNERS: dict[str, Callable[[Ctx, Clock, Part], None]] = {
    "tests": part_tests,
    "throughput": part_throughput,
    "tfcsg": part_tfcsg,
    "sbert": part_sbert,
    "gur-scratch": part_scratch,
}
GRACE_S = 15.0  # past the whole budget, the watchdog stops the part that is running
MIN_SHARE = 0.25  # a part starts only with at least this share of its own budget


def run_parts(ctx: Ctx, names: list[str], run_clock: Clock, parts: list[Part], save: Callable[[], None]) -> None:
    """Each part in order (appended to `parts`, saved after each) under its budget: its own, or more when the
    parts before it left time unused, keeping MIN_SHARE of every later part's."""
    budgets = {n: ctx.sizes.part_s[n] * ctx.args.budget_scale for n in names}
    for i, name in enumerate(names):
        later = names[i + 1 :]
        left = run_clock.left()
        budget = min(
            max(budgets[name], left - sum(budgets[n] for n in later)),
            left - sum(MIN_SHARE * budgets[n] for n in later),
        )
        part = Part(name, budget_s=round(budget, 1))
        parts.append(part)
        print(f"[{name}] budget {budget:.0f} s ({left:.0f} s left of the run)", flush=True)
        if budget < MIN_SHARE * budgets[name]:
            part.status = "skipped"
            part.reason = f"{left:.0f} s left of the run: under {MIN_SHARE:.0%} of the part's {budgets[name]:.0f} s"
            save()
            continue
        started = time.perf_counter()
        try:
            with part_state():
                RUNNERS[name](ctx, Clock(budget), part)
        except SkipPart as exc:
            part.status, part.reason = "skipped", str(exc)
        except OverBudget:
            part.status, part.reason = "error", "stopped by the watchdog: the run passed its whole budget"
        except Exception as exc:
            part.status, part.reason = "error", f"{type(exc).__name__}: {exc}"[:1000]
            part.traceback = traceback.format_exc()[-3000:]
            print(traceback.format_exc(), file=sys.stderr, flush=True)
        finally:
            part.wall_s = round(time.perf_counter() - started, 1)
            free_memory()
        print(f"[{name}] {part.status} in {part.wall_s:.0f} s{': ' + part.reason if part.reason else ''}", flush=True)
        save()


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.smoke:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # before torch starts: the CPU, whatever this machine has
    import torch

    cuda = torch.cuda.is_available()
    if not cuda and not args.smoke and not args.out:
        parser().error("no GPU here: --smoke runs the tiny sizes on the CPU; --out DIR runs the full sizes anyway")
    out = Path(args.out or (tempfile.mkdtemp(prefix="gpu-suite-smoke-") if args.smoke else RESULTS)).resolve()
    if args.smoke and out == RESULTS.resolve():
        parser().error("--smoke writes to a temp folder or --out, never to docs/results/")
    args.threads = (1 if args.smoke else 0) if args.threads is None else args.threads
    args.workers = (1 if args.smoke else 0) if args.workers is None else args.workers
    if args.threads:
        torch.set_num_threads(args.threads)
    sizes = SMOKE if args.smoke else GPU
    work = Path(args.work or (out / "work" if args.smoke else Path(tempfile.gettempdir()) / "gur-gpu-suite"))
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    ctx = Ctx(args, sizes, torch.device("cuda" if cuda else "cpu"), work.resolve())
    names = [n for n in PARTS if n in args.parts]
    budget = sizes.budget_s * args.budget_scale
    started, stamp = time.perf_counter(), datetime.now(UTC)
    entry = harness.new_entry(f"gpu-suite-{'smoke-' if args.smoke else ''}{stamp:%H%M%SZ}", stamp.date(), out)
    title = f"GPU suite, {'smoke' if args.smoke else 'gpu'} run at {stamp:%H:%M:%S} UTC: {', '.join(names)}"
    record: dict[str, Any] = {
        "suite": SUITE,
        "mode": "smoke" if args.smoke else "gpu",
        "command": shlex.join(["python", SUITE, *(argv if argv is not None else sys.argv[1:])]),
        "started": f"{stamp:%Y-%m-%d %H:%M:%S} UTC",
        "budget_s": budget,
        "environment": environment(cuda),
        "work": str(work),
    }
    words = [SUITE, *(argv if argv is not None else sys.argv[1:])]
    shown = harness.command(args, words, {"out": "OUT", "work": "WORK"})  # the entry's command
    print(
        f"gpu suite ({record['mode']}): {record['environment']['device']}; {budget:.0f} s; parts {names}", flush=True
    )

    parts: list[Part] = []

    def save() -> None:
        record["wall_s"] = round(time.perf_counter() - started, 1)
        record["parts"] = [{**dataclasses.asdict(p), "passed": p.passed} for p in parts]
        record["passed"] = all(p.passed is not False for p in parts)
        harness.write_entry(entry, title, markdown(record), record, shown)

    def watchdog(signum, frame):
        raise OverBudget()

    signal.signal(signal.SIGALRM, watchdog)
    signal.setitimer(signal.ITIMER_REAL, budget + GRACE_S)
    try:
        run_parts(ctx, names, Clock(budget), parts, save)
    except OverBudget:  # between two parts: what ran is recorded, the rest is not
        names_left = [n for n in names if n not in {p.name for p in parts}]
        parts.extend(Part(n, status="skipped", reason="the run passed its whole budget") for n in names_left)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    save()
    print("\n" + markdown(record))
    print(f"results: {entry}\n         {entry.with_suffix('.json')}")
    return 0 if record["passed"] else 1
