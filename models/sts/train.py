"""The one training loop every trainable STS family uses (the survey's recipe).

A family is an `nn.Module` whose `forward(a, b)` takes two lists of sentences and returns one
predicted similarity per pair on the [0, 1] scale, shape (B,). The loop is the survey's: AdamW,
MSE against score / 5, batch 32; the family chooses epochs and learning rate, and the config
records them. Linear warmup and decay are options (the cpu preset uses them to reach in one or
two epochs what a constant rate needs more for).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from models.training.precision import autocast_for, check_dtype
from models.training.schedule import get_lr
from storage.progress import Progress, current_logger


@dataclass(frozen=True)
class StsTrainConfig:
    epochs: float = 1.0  # fractions allowed: 0.5 is half an epoch's steps
    lr: float = 2e-5
    batch_size: int = 32
    max_len: int = 128  # tokens per sentence (per pair for cross-encoders)
    weight_decay: float = 0.01
    warmup: float = 0.0  # fraction of the steps spent warming up linearly
    schedule: str = "constant"  # "constant" or "linear" (decay to 0 after warmup): models.training.schedule
    subsample: int = 0  # > 0: train on this many pairs of a seeded permutation (cpu preset, LLM rows)
    max_steps: int = 0  # > 0: stop after this many steps (tests)
    rank_weight: float = 0.0  # > 0: adds this times CoSENT's ranking loss to the MSE (see `cosent_loss`)
    pooling: str = "cls"  # cross-encoders: "cls" (the survey's) or "mean" over the pair's tokens
    symmetric: bool = False  # cross-encoders: train on a random order of each pair, predict the mean of both
    dtype: str = "fp32"  # "bf16": bf16 autocast to train and predict (models.training.precision: faster on AMX CPUs)
    seed: int = 0
    eval_batch: int = 64


def cosent_loss(pred: torch.Tensor, target: torch.Tensor, scale: float = 20.0) -> torch.Tensor:
    """CoSENT (Su, 2022): log(1 + sum over pairs with target_i > target_j of exp(scale * (pred_j - pred_i))).

    Only the order of the predictions within a batch matters, which is what Spearman scores; the MSE
    term it is added to keeps the predictions on the score / 5 scale. (B,), (B,) -> scalar.
    """
    diff = scale * (pred[None, :] - pred[:, None])  # [i, j] = scale * (pred_j - pred_i)
    wrong = diff[target[:, None] > target[None, :]]
    return torch.logsumexp(torch.cat([diff.new_zeros(1), wrong]), dim=0)


def train_order(n: int, config: StsTrainConfig) -> list[np.ndarray]:
    """Batches of pair indices, reshuffled every epoch from the seed; fractional epochs are cut."""
    rng = np.random.default_rng(config.seed)
    pool = rng.permutation(n)[: config.subsample] if config.subsample else np.arange(n)
    batches: list[np.ndarray] = []
    for _ in range(math.ceil(config.epochs)):
        order = pool[rng.permutation(len(pool))]
        batches += [order[i : i + config.batch_size] for i in range(0, len(order), config.batch_size)]
    steps = math.ceil(config.epochs * math.ceil(len(pool) / config.batch_size))
    if config.max_steps:
        steps = min(steps, config.max_steps)
    return batches[:steps]


def train_scorer(
    model: nn.Module,
    a: list[str],
    b: list[str],
    score: np.ndarray,
    config: StsTrainConfig,
) -> list[dict]:
    """Fit `model` to score / 5 with AdamW and MSE; returns one row per step (step, lr, loss, seconds).

    Logs `sts train: 57/200 steps (28%, 0.5/s, 1m54s in, ETA 4m46s), loss=0.0312, lr=2e-05` at most every
    `storage.progress.LOG_EVERY_S` (10 s), and a heartbeat line when a step takes longer than that.
    """
    check_dtype(config.dtype)
    torch.manual_seed(config.seed)
    target = torch.tensor(np.asarray(score) / 5.0, dtype=torch.float32)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    batches = train_order(len(a), config)
    warmup = int(config.warmup * len(batches))
    model.train()
    log, started = [], time.perf_counter()
    logger = current_logger(__name__)
    with Progress("sts train", len(batches), logger, unit="steps", heartbeat=True) as progress:
        for step, idx in enumerate(batches):
            lr = get_lr(step, len(batches), warmup, config.schedule, config.lr)
            for group in optimizer.param_groups:
                group["lr"] = lr
            with autocast_for(device_of(model), config.dtype):
                pred = model([a[i] for i in idx], [b[i] for i in idx])  # (B,)
            loss = nn.functional.mse_loss(pred.float(), target[idx])
            if config.rank_weight:
                loss = loss + config.rank_weight * cosent_loss(pred.float(), target[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            log.append({"step": step, "lr": lr, "loss": loss.item(), "seconds": time.perf_counter() - started})
            progress.update(1, loss=f"{log[-1]['loss']:.4f}", lr=f"{lr:.3g}")
        progress.close(loss=f"{log[-1]['loss']:.4f}" if log else "-")
    model.eval()
    return log


def device_of(model: nn.Module) -> torch.device:
    """Where the model's weights are (the CPU for a model without parameters, such as word vectors)."""
    return next((p.device for p in model.parameters()), torch.device("cpu"))


@torch.no_grad()
def predict(
    model: nn.Module,
    a: list[str],
    b: list[str],
    batch_size: int = 64,
    desc: str = "sts predict",
    dtype: str = "fp32",
) -> np.ndarray:
    """Predictions on the [0, 1] scale for every pair, in order (eval mode, no gradients, the precision
    the model trained in); logs progress in pairs like `train_scorer`."""
    model.eval()
    out = []
    with Progress(desc, len(a), current_logger(__name__), unit="pairs", heartbeat=True) as progress:
        for i in range(0, len(a), batch_size):
            with autocast_for(device_of(model), dtype):
                pred = model(a[i : i + batch_size], b[i : i + batch_size])  # (B,)
            out.append(pred.float().cpu())
            progress.update(len(out[-1]))
        progress.close()
    return torch.cat(out).numpy().astype(np.float64) if out else np.zeros(0)
