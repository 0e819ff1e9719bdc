"""Training checkpoints: tensors and plain containers only, loaded with `weights_only=True`.

A checkpoint folder may come from someone else's data root, so loading one must never run
code: everything saved is converted to tensors, numbers, strings, lists, tuples and dicts
(numpy arrays and scalars become lists and Python numbers), and `torch.load` refuses anything
else.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from storage.atomic import atomic_path


class UnsafeCheckpointError(RuntimeError):
    pass


def plain(value: Any) -> Any:
    """`value` with numpy arrays and scalars turned into lists and Python numbers (recursively)."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [plain(v) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value


def latest_checkpoint(ckpt_dir: Path) -> Path | None:
    done = sorted(ckpt_dir.glob("step-*.pt"))  # only complete files carry this name (tmp + rename)
    return done[-1] if done else None


def save_checkpoint(ckpt_dir: Path, state: dict[str, Any], keep: int) -> Path:
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    path = ckpt_dir / f"step-{state['step']:08d}.pt"
    with atomic_path(path) as tmp:  # a hidden name until complete: `step-*.pt` never matches it
        torch.save(plain(state), tmp)
    for old in sorted(ckpt_dir.glob("step-*.pt"))[:-keep]:
        old.unlink()
    return path


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Tensors and plain containers only; anything else is refused with the file named."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises UnpicklingError (or a RuntimeError wrapping it)
        if "weights_only" not in str(exc) and "Unsupported" not in str(exc):
            raise
        raise UnsafeCheckpointError(
            f"{path}: refusing to load a checkpoint that holds more than tensors and plain containers "
            f"(written by another program, or crafted); delete it to resume from the one before"
        ) from None


def rng_state() -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": plain(np.random.get_state())}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    name, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])
