"""The precision rule `gur train` and `gur sts` share: which dtype a forward pass computes in."""

from __future__ import annotations

import pytest
import torch

from models.training.precision import autocast_for, check_dtype, uses_bf16

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def test_auto_is_bf16_on_cuda_only_and_bf16_is_bf16_everywhere():
    assert uses_bf16(CUDA, "auto") and not uses_bf16(CPU, "auto")
    assert uses_bf16(CPU, "bf16") and uses_bf16(CUDA, "bf16")
    assert not uses_bf16(CPU, "fp32") and not uses_bf16(CUDA, "fp32")


def test_a_linear_layer_computes_in_the_chosen_dtype_on_the_cpu():
    layer = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4)
    with autocast_for(CPU, "bf16"):
        assert layer(x).dtype == torch.bfloat16
    for dtype in ("auto", "fp32"):
        with autocast_for(CPU, dtype):
            assert layer(x).dtype == torch.float32
    assert layer.weight.dtype == torch.float32  # autocast never touches the stored weights


def test_an_unknown_dtype_is_a_one_line_error():
    with pytest.raises(ValueError, match="dtype 'fp16': expected one of auto, bf16, fp32"):
        check_dtype("fp16")
    with pytest.raises(ValueError, match="dtype 'half'"):
        autocast_for(CPU, "half")
