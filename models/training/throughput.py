"""The GUR T5's throughput options (attention kernel, packing, fused LM head) checked before a run builds anything,
and the one-line hint a GPU run at the defaults prints."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from models.training.config import TrainConfig

ATTENTION = ("eager", "sdpa", "flex")


def check_attention(name: str) -> str:
    if name not in ATTENTION:
        raise ValueError(f"unknown attention {name!r}; choose from {ATTENTION}")
    return name


def check_throughput_options(cfg: TrainConfig, device: torch.device) -> None:
    """One-line errors for attention / packing / fused_lm_head values that cannot run."""
    check_attention(cfg.attention)
    changed = [
        name
        for name, default in (("attention", "eager"), ("packing", False), ("pack_len", 0), ("fused_lm_head", False))
        if getattr(cfg, name) != default
    ]
    if changed and (cfg.method != "gur" or cfg.init_from):
        raise ValueError(
            f"{', '.join(changed)}: options of the GUR T5 trained from scratch (method gur, no init_from)"
        )
    if cfg.pack_len and cfg.pack_len < max(cfg.short_seq_len, cfg.long_seq_len):
        raise ValueError(f"pack_len {cfg.pack_len} is shorter than a bucket's sequence length; use 0 or >= both")
    if cfg.attention == "flex" and device.type != "cuda":
        raise ValueError(
            "attention 'flex' trains on a GPU only (torch has no FlexAttention backward on the CPU); use sdpa"
        )


def gpu_hint(cfg: TrainConfig, device_type: str) -> str:
    """A line for a GUR run from scratch on a GPU at the throughput defaults: the measured faster options (not
    the default: a changed default would change every existing run's fingerprint and a CPU run's bytes)."""
    if device_type != "cuda" or cfg.method != "gur" or cfg.init_from:
        return ""
    if cfg.attention != "eager" or cfg.packing or cfg.fused_lm_head:
        return ""
    return (
        'GPU: --options \'{"attention": "sdpa", "packing": true, "fused_lm_head": true, "compile": true, '
        '"fixed_shapes": true}\' trains the same losses faster (the results log: docs/results/, compiled GUR-Small '
        "on a GPU)"
    )
