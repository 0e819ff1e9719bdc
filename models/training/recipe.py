"""What differs between training methods (`Recipe`), and which module builds each method's: the loop in
models/training/loop.py imports no method family; a family's `recipe` module imports the loop's parts."""

from __future__ import annotations

import importlib
from collections.abc import Callable
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
    if cfg.teacher and cfg.method != "documents":
        raise ValueError(f"a teacher is distilled by method 'documents' only, not {cfg.method!r}")
    return importlib.import_module(METHODS[cfg.method]).build(cfg, out, rank, world, ddp, load_weights)


def in_loop_batches(cfg: TrainConfig, rank: int, make: Callable[[], list]) -> list:
    """The held-out batches the loop scores every `eval_every` steps: built by rank 0 alone, none when off."""
    return list(make()) if rank == 0 and cfg.eval_every else []


def query_positive_pair(model, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """A fine-tuned encoder's in-loop accuracy: row i's query (`input_ids`) should retrieve row i's positive
    (`kw_input_ids`: a keyword sequence, a passage, a paired sentence)."""
    q = model.embed(batch["input_ids"], batch["attention_mask"])
    return q, model.embed(batch["kw_input_ids"], batch["kw_attention_mask"])


def encoder_recipe(
    cfg: TrainConfig,
    tok: Any,
    model: torch.nn.Module,
    loss: torch.nn.Module,
    stream: Any,
    eval_batches: list[dict[str, torch.Tensor]],
    model_config: dict[str, Any],
    info: dict[str, Any],
) -> Recipe:
    """The Recipe of a pretrained encoder fine-tuned on (query, positive) batches (tfcsg, simcse, documents):
    `query_positive_pair` for the in-loop accuracy, the encoder exported with its tokenizer in `cfg.pooling`,
    and DDP told that some parameters go unused (TfcsgModel's auto-encoder and LM head train only with kl and
    s2s)."""
    from models.training.export import export_encoder

    def export(trained, folder: Path) -> None:
        export_encoder(trained.encoder, tok, folder, pooling=cfg.pooling)

    return Recipe(
        model=model,
        loss=loss,
        stream=stream,
        eval_batches=eval_batches,
        eval_pair=query_positive_pair,
        model_config=model_config,
        export=export,
        find_unused=True,
        info=info,
    )
