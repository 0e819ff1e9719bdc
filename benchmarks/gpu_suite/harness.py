"""What every part shares: the sizes and budgets, a part's record (rows, checks), the loss checks, the product's
training step outside its loop, and the results' environment and table."""

from __future__ import annotations

import argparse
import dataclasses
import gc
import math
import os
import platform
import shlex
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_suite import REPO
from gpu_suite.options import parser
from gpu_suite.settings import SUITE


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
    corpus_articles: int  # a MediaWiki dump: first N articles build the pairs (0: all)
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
    corpus_articles=0,
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
    corpus_articles=24,
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
        words = ["python", SUITE, "--parts", part]
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
    """The run's figures as its entry shows them (the entry's header names the command): a summary line, then
    one table with a row per figure row (with its command) and per check."""

    def cell(text: Any) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    env, verdict = record["environment"], "passed" if record["passed"] else "FAILED"
    lines = [
        f"{env['device']}, driver {env['driver'] or '-'}, torch {env['torch']} (CUDA {env['cuda'] or '-'}), "
        f"Python {env['python']}, commit {(env['git_commit'] or '-')[:12]}{' (dirty)' if env['git_dirty'] else ''}; "
        f"{record['wall_s']:.0f} s of a {record['budget_s']:.0f} s budget: **{verdict}**",
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
