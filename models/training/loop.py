"""Encoder training, one loop for every method: config, recipe, optimizer, get_lr, evaluate, loop. Resumable; DDP.

A method's `Recipe` (models/training/recipe.py) gives the model, loss, batch stream, held-out batches and
export, built by its family's `recipe` module: `gur` (T5 on shard pairs, models/gur/recipe.py), `tfcsg` and
`simcse` (a pretrained encoder on questions and their keyword sequences, models/tfcsg/recipe.py), `documents`
(a pretrained encoder on pairs cut from long documents, models/documents/recipe.py). Everything else
(optimizer, schedule, accumulation, bf16, DDP, signals, checkpoints, metrics, curves, export, summary) is the
same code, and imports no method family.

    python -m models.training.loop --config run.json                 # one process (CPU or one GPU)
    torchrun --nproc_per_node=8 -m models.training.loop --config run.json

`<out_dir>/checkpoints/step-NNNNNNNN.pt` is one dict (model, optimizer, scheduler, step, data
position of every rank, RNG states, metrics so far), written atomically every `ckpt_every`
steps and at exit; a restarted run continues from the newest one with the same loss curve.
At the end: `metrics.csv` / `metrics.parquet`, `loss_curve.png`, `samples.jsonl` (span infills
on fixed prompts at each checkpoint), `export/` and `summary.json` (written last).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import os
import signal
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.distributed as dist

from models.training.checkpoints import latest_checkpoint, load_checkpoint, rng_state, save_checkpoint, set_rng_state
from models.training.config import TrainConfig
from models.training.measures import compute_loss_from_embeddings, count_tokens, in_batch_accuracy
from models.training.precision import autocast_for
from models.training.process import run_lock, watch_parent
from models.training.recipe import METHODS, Recipe, build_recipe
from models.training.schedule import get_lr
from models.training.throughput import check_throughput_options, gpu_hint
from storage.atomic import atomic_write_text
from storage.progress import eta_seconds, format_duration


def gather(obj: Any, world: int) -> list[Any]:
    if world == 1:
        return [obj]
    out: list[Any] = [None] * world
    dist.all_gather_object(out, obj)
    return out


@torch.no_grad()
def evaluate(model, batches: list[dict[str, torch.Tensor]], device: torch.device, cfg: TrainConfig, pair) -> dict:
    """Held-out in-batch retrieval accuracy (chance = 1 / eval_batch) and CL loss on unmasked pairs; `pair(model,
    batch)` gives the two sides (the recipe's `eval_pair`)."""
    model.eval()
    accs, losses = [], []
    for batch in batches:
        batch = {k: v.to(device) for k, v in batch.items()}
        a, b = pair(model, batch)
        accs.append(in_batch_accuracy(a, b))
        losses.append(float(compute_loss_from_embeddings(a, b, cfg.temperature)))
    model.train()
    return {
        "heldout_acc": float(np.mean(accs)) if accs else float("nan"),
        "heldout_cl": float(np.mean(losses)) if losses else float("nan"),
    }


def part_name(key: str) -> str:
    """A loss part's column in metrics.parquet: `lm` -> `lm_loss`, `acc` -> `train_acc`."""
    return "train_acc" if key == "acc" else f"{key}_loss"


def write_reports(out: Path, metrics: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    if not metrics:
        return
    keys = sorted({k for row in metrics for k in row})
    table = pa.table({k: [row.get(k) for row in metrics] for k in keys})
    pq.write_table(table, out / "metrics.parquet")
    pcsv.write_csv(table, out / "metrics.csv")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    steps = [r["step"] for r in metrics]
    for key in ("loss", *sorted({k for r in metrics for k in r if k.endswith("_loss")})):
        if any(key in r for r in metrics):
            axes[0].plot(steps, [r.get(key, np.nan) for r in metrics], label=key)
    axes[0].set_xlabel("step")
    axes[0].legend()
    for key in ("train_acc", "heldout_acc"):
        pts = [(r["step"], r[key]) for r in metrics if key in r and not math.isnan(r[key])]
        if pts:
            axes[1].plot(*zip(*pts, strict=True), marker="o" if key == "heldout_acc" else None, label=key)
    axes[1].set_xlabel("step")
    axes[1].set_ylabel("in-batch retrieval accuracy")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(out / "loss_curve.png", dpi=100)
    plt.close(fig)


def train(cfg: TrainConfig) -> dict[str, Any]:
    """Train (or resume) one run; the first rank holds the run folder's trainer lock throughout."""
    first_rank = int(os.environ.get("RANK", "0")) == 0
    with run_lock(Path(cfg.out_dir)) if first_rank else nullcontext():
        return _train(cfg)


def _train(cfg: TrainConfig) -> dict[str, Any]:
    ranks = init_ranks(cfg)
    if not ranks.ddp:
        return _train_ranks(cfg, ranks)
    # The process group must not die with the DDP model: the C++ Reducer drops its last reference while
    # holding the GIL, and gloo's destructor then waits for a worker thread that needs the GIL to free a
    # finished collective, so the rank hangs at exit (pytorch#56297; under load, about one run in five).
    # This handle outlives the model; dropped here, through the Python binding, the GIL is released first.
    world = dist.group.WORLD
    summary = _train_ranks(cfg, ranks)
    gc.collect()  # the model, should a reference cycle hold it, goes now, while `world` still holds the group
    dist.barrier()
    dist.destroy_process_group()
    del world
    return summary


def _train_ranks(cfg: TrainConfig, ranks: Ranks) -> dict[str, Any]:
    autocast = autocast_for(ranks.device, cfg.dtype)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    watch_parent()

    if cfg.method not in METHODS:
        raise ValueError(f"unknown method {cfg.method!r}; choose from {sorted(METHODS)}")
    check_throughput_options(cfg, ranks.device)
    if ranks.master and (hint := gpu_hint(cfg, ranks.device.type)):
        print(hint, flush=True)
    resume = latest_checkpoint(out / "checkpoints")
    ckpt = load_checkpoint(resume) if resume else None
    recipe = build_recipe(cfg, out, ranks.rank, ranks.world, ranks.ddp, load_weights=ckpt is None)
    model = recipe.model
    if cfg.epochs > 0:
        cfg = dataclasses.replace(cfg, max_steps=recipe.stream.steps_for(cfg.epochs))
        if ranks.master:
            print(f"{cfg.epochs:g} epochs = {cfg.max_steps} steps", flush=True)
    if ckpt:
        model.load_state_dict(ckpt["model"])
    model.to(ranks.device)
    optimizer, scheduler = build_optimizer(model, cfg, ranks.device)
    run = Run(cfg, ranks, out, recipe, optimizer, scheduler)
    if ckpt:
        restore(run, ckpt, resume.name)
    else:
        torch.manual_seed(cfg.seed + ranks.rank)  # dropout differs per rank
    del ckpt
    return run_steps(run, loss_runner(recipe, cfg, ranks), autocast)


def run_steps(run: Run, runner: torch.nn.Module, autocast: Any) -> dict[str, Any]:
    """The loop: steps until `max_steps`, the time budget or a signal, with the held-out row at step 0, a row
    every `log_every` steps, evaluations and checkpoints as due; then `finish`."""
    cfg, ranks, recipe, model = run.cfg, run.ranks, run.recipe, run.recipe.model
    stop = stop_on_signals()
    if ranks.master and recipe.eval_batches and run.step == 0:  # where it starts: chance, or the init's skill
        row = {"step": 0, **evaluate(model, recipe.eval_batches, ranks.device, cfg, recipe.eval_pair)}
        run.metrics.append(row)
        print(f"step 0 heldout_acc {row['heldout_acc']:.4g} heldout_cl {row['heldout_cl']:.4g}", flush=True)
    model.train()
    t0, tokens, last_saved, saved_at = time.time(), 0, run.step, time.time()
    started = (t0, run.step)  # the measured step rate (this process, evaluations included) gives the ETA
    run.segment_start = t0
    if ranks.master and cfg.max_minutes:
        print(f"time budget: {cfg.max_minutes:g} min of training ({run.trained_s / 60:.1f} used)", flush=True)
    while run.step < cfg.max_steps and not stop["flag"] and not run.out_of_time:
        done = train_step(run, runner, autocast)
        tokens += done.tokens
        run.out_of_time = out_of_time(run)
        last = run.step == cfg.max_steps or run.out_of_time
        eval_now = bool(cfg.eval_every) and (run.step % cfg.eval_every == 0 or last)
        if run.step % cfg.log_every == 0 or last or eval_now:
            log_row(run, done, tokens, time.time() - t0, eval_now, started)
            t0, tokens = time.time(), 0
        if cfg.stop_at_step and run.step == cfg.stop_at_step:
            return {"stopped_at": run.step}
        if checkpoint_due(run, stop, saved_at):
            save_run(run)
            last_saved, saved_at = run.step, time.time()
    if last_saved != run.step:
        save_run(run)
    if stop["flag"] and ranks.master and run.step < cfg.max_steps and not run.out_of_time:
        print(f"stopped at step {run.step} by a signal; checkpoint saved, rerun to resume", flush=True)
    if run.out_of_time and ranks.master:
        print(f"time budget of {cfg.max_minutes:g} min spent at step {run.step} of {cfg.max_steps}: done", flush=True)
    return finish(run)


def out_of_time(run: Run) -> bool:
    """Whether `max_minutes` of training (resumed runs included) are spent. Checked every `log_every` steps
    (and under DDP decided by rank 0's clock, so every rank stops after the same step)."""
    cfg = run.cfg
    if not cfg.max_minutes or run.step % cfg.log_every:
        return False
    spent = run.trained_seconds() >= cfg.max_minutes * 60
    if run.ranks.ddp:
        flag = torch.tensor([float(spent)], device=run.ranks.device)
        dist.broadcast(flag, src=0)
        spent = bool(flag.item())
    return spent


@dataclass(frozen=True)
class Ranks:
    """Where this process trains: rank `rank` of `world` (torchrun's environment; 0 of 1 without it)."""

    ddp: bool
    rank: int
    world: int
    local_rank: int
    device: torch.device

    @property
    def master(self) -> bool:
        return self.rank == 0


def init_ranks(cfg: TrainConfig) -> Ranks:
    """Join the process group under torchrun (NCCL on GPUs, else gloo), pick this rank's device and threads."""
    ddp = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if ddp:
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if ddp else (0, 1)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    return Ranks(ddp, rank, world, local_rank, device)


def build_optimizer(
    model: torch.nn.Module, cfg: TrainConfig, device: torch.device
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW with weight decay on matrices only, and `get_lr`'s schedule as a multiplier of `cfg.lr`."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=(0.9, 0.999),
        fused=device.type == "cuda",
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: get_lr(s, cfg.max_steps, cfg.warmup_steps, cfg.schedule, min_ratio=cfg.min_lr_ratio)
    )
    return optimizer, scheduler


@dataclass
class Run:
    """One run between steps: what a checkpoint saves (model, optimizer, schedule, step, metrics, the
    window of per-step stats not yet logged) and where it goes."""

    cfg: TrainConfig
    ranks: Ranks
    out: Path
    recipe: Recipe
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    step: int = 0
    metrics: list[dict[str, Any]] = field(default_factory=list)
    window: dict[str, Any] = field(default_factory=lambda: {"sum": None, "n": 0})  # stats summed since the last row
    trained_s: float = 0.0  # training seconds before this process (a checkpoint carries them: `max_minutes`)
    segment_start: float = 0.0  # when this process began training
    out_of_time: bool = False  # `max_minutes` spent: the run is complete at this step

    @property
    def model(self) -> torch.nn.Module:
        return self.recipe.model

    def trained_seconds(self) -> float:
        return self.trained_s + (time.time() - self.segment_start if self.segment_start else 0.0)


def restore(run: Run, ckpt: dict[str, Any], name: str) -> None:
    """Continue from checkpoint `ckpt`: optimizer, schedule, step and metrics; with the same number of ranks
    also each rank's data position, RNG state and unlogged window (else the data streams restart)."""
    master = run.ranks.master
    run.optimizer.load_state_dict(ckpt["optimizer"])
    run.scheduler.load_state_dict(ckpt["scheduler"])
    run.step, run.metrics = ckpt["step"], ckpt["metrics"]
    run.trained_s = float(ckpt.get("trained_s", 0.0))
    run.out_of_time = bool(ckpt.get("out_of_time", False))
    if ckpt["world_size"] == run.ranks.world:
        run.window = ckpt["window"][run.ranks.rank]
        run.recipe.stream.load_state_dict(ckpt["data"][run.ranks.rank])
        set_rng_state(ckpt["rng"][run.ranks.rank])
    elif master:
        print(f"resuming {run.ranks.world} ranks from {ckpt['world_size']}: data streams restart at their seeds")
    if master:
        print(f"resumed from {name} at step {run.step}")


def loss_runner(recipe: Recipe, cfg: TrainConfig, ranks: Ranks) -> torch.nn.Module:
    """What a step calls on a batch: the recipe's loss (around the compiled model when `compile`), wrapped in DDP
    across ranks."""
    model = recipe.model
    if cfg.compile:
        recipe.loss.model = torch.compile(model)
    if not ranks.ddp:
        return recipe.loss
    return torch.nn.parallel.DistributedDataParallel(
        recipe.loss,
        device_ids=[ranks.local_rank] if ranks.device.type == "cuda" else None,
        find_unused_parameters=recipe.find_unused,
    )


def stop_on_signals() -> dict[str, bool]:
    """SIGTERM (a scheduler, `kill`) and SIGINT (Ctrl-C) set the flag: the loop finishes the step, saves a
    checkpoint and exits."""
    stop = {"flag": False}
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.update(flag=True))
    return stop


class StepDone(NamedTuple):
    lr: float  # the rate this step used
    tokens: int  # tokens in this rank's batches
    parts: list[str]  # names of the loss parts, in the order of the window's stats after the loss


def train_step(run: Run, runner: torch.nn.Module, autocast: Any) -> StepDone:
    """One optimizer step over `grad_accum` micro-batches; adds the step's mean loss and parts to the window."""
    cfg, device, ddp = run.cfg, run.ranks.device, run.ranks.ddp
    parts_sum: dict[str, torch.Tensor] = {}
    loss_sum = torch.zeros((), device=device)
    tokens = 0
    for micro in range(cfg.grad_accum):
        _, batch = run.recipe.stream.next_batch()
        tokens += count_tokens(batch)
        batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        sync = micro == cfg.grad_accum - 1
        with runner.no_sync() if ddp and not sync else nullcontext(), autocast:
            loss, parts = runner(batch)
        (loss / cfg.grad_accum).backward()
        loss_sum += loss.detach() / cfg.grad_accum
        for k, v in parts.items():
            parts_sum[k] = parts_sum.get(k, 0) + v.detach().float().to(device) / cfg.grad_accum
    if cfg.grad_clip:
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), cfg.grad_clip)
    lr = run.optimizer.param_groups[0]["lr"]
    run.optimizer.step()
    run.scheduler.step()
    run.optimizer.zero_grad(set_to_none=True)
    run.step += 1
    stats = torch.stack([loss_sum, *parts_sum.values()]).to(device)  # (1 + parts,) this step, this rank
    window = run.window
    window["sum"] = stats if window["sum"] is None else window["sum"].to(device) + stats
    window["n"] += 1
    return StepDone(lr, tokens, list(parts_sum))


def log_row(run: Run, done: StepDone, tokens: int, elapsed: float, eval_now: bool, started: tuple[float, int]) -> None:
    """Append a metrics row (the window's means over ranks, tokens/s since the last row, held-out metrics
    when `eval_now`) and print it on rank 0 with the ETA at the step rate since `started` (time, step)."""
    cfg, ranks = run.cfg, run.ranks
    stats = run.window["sum"] / run.window["n"]  # mean over the steps since the last row
    run.window.update(sum=None, n=0)
    if ranks.ddp:
        dist.all_reduce(stats, op=dist.ReduceOp.AVG)
    n_tokens = sum(gather(tokens, ranks.world))
    row = {"step": run.step, "lr": done.lr, "loss": float(stats[0]), "tokens_per_s": n_tokens / max(elapsed, 1e-9)}
    row.update({part_name(k): float(v) for k, v in zip(done.parts, stats[1:], strict=True)})
    recipe = run.recipe
    if eval_now and ranks.master and recipe.eval_batches:
        row.update(evaluate(run.model, recipe.eval_batches, ranks.device, cfg, recipe.eval_pair))
    run.metrics.append(row)
    if ranks.master:
        line = " ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items())
        eta = eta_seconds(run.step - started[1], cfg.max_steps - started[1], time.time() - started[0])
        if eta is not None and cfg.max_minutes:  # the budget ends it first when it is shorter
            eta = min(eta, max(0.0, cfg.max_minutes * 60 - run.trained_seconds()))
        if eta is not None and run.step < cfg.max_steps and not run.out_of_time:
            line += f" eta {format_duration(eta)}"
        print(line, flush=True)


def checkpoint_due(run: Run, stop: dict[str, bool], saved_at: float) -> bool:
    """A checkpoint every `ckpt_every` steps, and after `ckpt_every_s` seconds without one (so an early kill of
    a slow run still leaves something to resume from). Under DDP the ranks agree on it and on `stop`."""
    cfg, step = run.cfg, run.step
    time_due = bool(cfg.ckpt_every_s) and time.time() - saved_at >= cfg.ckpt_every_s
    if run.ranks.ddp:
        if step % cfg.log_every == 0:
            # Ranks agree on stopping and on saving after the same step (or the others would
            # wait in a collective forever); only every log_every steps, since `.item()` waits.
            flags = torch.tensor([float(stop["flag"]), float(time_due)], device=run.ranks.device)
            dist.all_reduce(flags, op=dist.ReduceOp.MAX)
            stop["flag"], time_due = bool(flags[0].item()), bool(flags[1].item())
        else:
            time_due = False
    return step % cfg.ckpt_every == 0 or time_due


def save_run(run: Run) -> None:
    """A checkpoint of the run (every rank sends its data position, RNG state and window; rank 0 writes),
    and the recipe's samples at this step."""
    world, window = run.ranks.world, run.window
    data = gather(run.recipe.stream.state_dict(), world)
    rngs = gather(rng_state(), world)
    windows = gather({"sum": None if window["sum"] is None else window["sum"].cpu(), "n": window["n"]}, world)
    if not run.ranks.master:
        return
    state = {
        "model": run.model.state_dict(),
        "optimizer": run.optimizer.state_dict(),
        "scheduler": run.scheduler.state_dict(),
        "step": run.step,
        "data": data,
        "rng": rngs,
        "metrics": run.metrics,
        "trained_s": run.trained_seconds(),
        "out_of_time": run.out_of_time,
        "window": windows,
        "world_size": world,
        "config": dataclasses.asdict(run.cfg),
        "model_config": run.recipe.model_config,
    }
    save_checkpoint(run.out / "checkpoints", state, run.cfg.keep_checkpoints)
    if run.recipe.samples is not None:
        with (run.out / "samples.jsonl").open("a") as f:
            for row in run.recipe.samples(run.model):
                f.write(json.dumps({"step": run.step, **row}, ensure_ascii=False) + "\n")


def finish(run: Run) -> dict[str, Any]:
    """The run's summary; when complete, rank 0 writes the reports, the export and `summary.json` (last)."""
    cfg, metrics = run.cfg, run.metrics
    summary: dict[str, Any] = {"step": run.step, "complete": run.step >= cfg.max_steps or run.out_of_time}
    if run.out_of_time:
        summary["stopped_by"] = f"time budget ({cfg.max_minutes:g} min)"
    if run.ranks.master and summary["complete"]:
        write_reports(run.out, metrics)
        if cfg.export:
            run.recipe.export(run.model, run.out / "export")
        evals = [r for r in metrics if "heldout_acc" in r]
        summary.update(
            final=metrics[-1] if metrics else {},
            heldout_acc=[(r["step"], r["heldout_acc"]) for r in evals],
            chance=1 / cfg.eval_batch,
            params=run.model.num_params(),
            export="export" if cfg.export else None,
            max_steps=cfg.max_steps,
            trained_s=round(run.trained_seconds(), 3),  # in the step loop (a night's plan: its rate per step)
            **run.recipe.info,
        )
        atomic_write_text(run.out / "summary.json", json.dumps(summary, indent=2) + "\n")
    return summary


def load_config(path: str | Path) -> TrainConfig:
    return TrainConfig(**json.loads(Path(path).read_text()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True, help="JSON file with TrainConfig fields")
    args = parser.parse_args(argv)
    summary = train(load_config(args.config))
    raise SystemExit(0 if summary.get("complete") else 3)


if __name__ == "__main__":
    main()
