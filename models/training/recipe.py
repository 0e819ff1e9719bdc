"""What differs between training methods (`Recipe`), and which module builds each method's: the loop in
models/training/loop.py imports no method family; a family's `recipe` module imports the loop's parts."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from models.training.config import TrainConfig

# method -> the module whose `build(cfg, out, rank, world, ddp, load_weights)` returns its Recipe
METHODS = {
    "gur": "models.gur.recipe",
    "tfcsg": "models.tfcsg.recipe",
    "simcse": "models.tfcsg.recipe",
    "documents": "models.documents.recipe",
}


@dataclass
class Recipe:
    """What differs between methods; the loop, optimizer, checkpoints and reports are shared."""

    model: torch.nn.Module  # .embed(ids, mask) -> (B, D) normalised, .num_params()
    loss: torch.nn.Module  # batch -> (loss, parts); its `.model` is the model (compiled by the loop when asked)
    stream: Any  # .next_batch() -> (bucket, batch), .state_dict(), .load_state_dict(), .steps_for(epochs)
    eval_batches: list[dict[str, torch.Tensor]]
    eval_pair: Any  # (model, batch on device) -> (a, b): row i of a should retrieve row i of b
    model_config: dict[str, Any]
    export: Any  # (model, folder) -> None
    samples: Any = None  # model -> rows for samples.jsonl at each checkpoint, or None
    find_unused: bool = False  # DDP: parameters that some step does not use
    info: dict[str, Any] = field(default_factory=dict)  # goes to summary.json


def build_recipe(cfg: TrainConfig, out: Path, rank: int, world: int, ddp: bool, load_weights: bool) -> Recipe:
    """The Recipe of `cfg.method`, built by its family's module."""
    if cfg.method not in METHODS:
        raise ValueError(f"unknown method {cfg.method!r}; choose from {sorted(METHODS)}")
    return importlib.import_module(METHODS[cfg.method]).build(cfg, out, rank, world, ddp, load_weights)
