"""Which floating-point precision a training run computes in: one rule for `gur train` and `gur sts`.

- `fp32`: full precision everywhere.
- `bf16`: bfloat16 autocast for the forward pass on any device. The weights, the optimizer state
  and the loss stay fp32; matrix products run in bf16. On a CUDA GPU that is the usual mixed
  precision; on a CPU with AMX or AVX-512 BF16 (`lscpu` lists `amx_bf16` / `avx512_bf16`)
  a base-size encoder's training step is faster (`benchmarks/cpu_bf16.py`; the results log:
  docs/results/, training steps in fp32 against bf16 autocast on the CPU). On a CPU without them torch
  emulates bf16, slower than fp32.
- `auto`: bf16 on CUDA, fp32 on the CPU (the default of `gur train`: its CPU results in the results
  log are all fp32).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch

DTYPES = ("auto", "bf16", "fp32")


def check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: expected one of {', '.join(DTYPES)}")


def uses_bf16(device: torch.device, dtype: str) -> bool:
    check_dtype(dtype)
    return dtype == "bf16" or (dtype == "auto" and device.type == "cuda")


def autocast_for(device: torch.device, dtype: str) -> AbstractContextManager:
    """A context manager for the forward pass: bf16 autocast on `device` when `dtype` asks for it, else nothing."""
    if not uses_bf16(device, dtype):
        return nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


def cpu_has_bf16_units() -> bool:
    """Whether this CPU multiplies bf16 in hardware (AMX or AVX-512 BF16), from /proc/cpuinfo (Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return False
    return bool({"amx_bf16", "avx512_bf16"} & set(flags.split()))
