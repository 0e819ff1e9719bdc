"""The learning-rate schedule of both training loops: `gur train` (`models/training/loop.py`) and the STS units
(`models/sts/train.py`)."""

from __future__ import annotations

import math

SCHEDULES = ("constant", "linear", "cosine")


def get_lr(step: int, total: int, warmup: int, schedule: str, peak: float = 1.0, min_ratio: float = 0.0) -> float:
    """Learning rate at `step` (0-based) of `total`: `peak * (step + 1) / warmup` for the first `warmup` steps,
    then `peak` (constant), a linear decay that reaches 0 after step `total - 1` (linear), or a half cosine from
    `peak` down to `peak * min_ratio` at step `total` (cosine).

    `peak=1.0` gives a multiplier for `torch.optim.lr_scheduler.LambdaLR` (`gur train`); the STS loop passes
    its rate. Each expression keeps its loop's order of operations: another form of the same formula would change
    the rates' last bits, and with them a run's weights.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown learning-rate schedule {schedule!r}: expected one of {', '.join(SCHEDULES)}")
    if step < warmup:
        return peak * (step + 1) / warmup
    if schedule == "constant":
        return peak
    if schedule == "linear":
        return peak * max(0.0, (total - step) / max(1, total - warmup))
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))
