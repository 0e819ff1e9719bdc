"""How full the disk holding a data root is: what a night checks before it trains, and what a failed write is
blamed on when the disk is what stopped it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

# What a candidate writes per byte of its start's weights, rounded up from a MiniLM night: its run folder (export,
# checkpoints with the optimizer's state) and the mixed export (the results log: docs/results/, a night on a
# full disk).
SPACE_FACTOR = 8
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
NO_SPACE = ("No space left on device", "ENOSPC", "Disk quota exceeded")


def megabytes(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def _existing(path: str | os.PathLike) -> Path:
    """`path` or its nearest existing parent (a root not made yet lies on its parent's disk)."""
    found = Path(path).resolve()
    while not found.exists() and found != found.parent:
        found = found.parent
    return found


def free_bytes(path: str | os.PathLike) -> int:
    return shutil.disk_usage(_existing(path)).free


def weights_bytes(model: str | os.PathLike | None) -> int:
    """The size of a model folder's weight files (0 for anything that is not a folder)."""
    if not model or not Path(model).is_dir():
        return 0
    return sum(p.stat().st_size for p in Path(model).rglob("*") if p.suffix in WEIGHT_SUFFIXES and p.is_file())


def training_space(start: str | os.PathLike | None) -> int:
    """About what a candidate trained from `start` writes: `SPACE_FACTOR` times its weights."""
    return SPACE_FACTOR * weights_bytes(start)


def out_of_space(path: str | os.PathLike, output: str = "") -> str | None:
    """Why a write under `path` failed when the disk is the reason: `output` (an error, a process's last lines)
    names ENOSPC, or less than 1% of the disk is free. None otherwise."""
    usage = shutil.disk_usage(_existing(path))
    if not any(text in output for text in NO_SPACE) and usage.free >= usage.total / 100:
        return None
    return full_disk(path)


def full_disk(path: str | os.PathLike) -> str:
    """The disk holding `path` named as full: how full, and what to do."""
    usage = shutil.disk_usage(_existing(path))
    return (
        f"no space left on the disk holding {path} ({megabytes(usage.free)} free of {megabytes(usage.total)}): "
        "free space (`gur gc --apply`; `gur du` shows what the root holds) or move the root to a larger disk"
    )
