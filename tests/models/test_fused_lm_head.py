"""The chunked LM head + cross-entropy: plain cross-entropy's loss and gradients, without full logits."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from models.gur.fused_head import linear_cross_entropy
from models.gur.model import GurModel, preset_config


def problem(seed: int, n: int = 53, c: int = 24, v: int = 97, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, c, generator=g, dtype=dtype, requires_grad=True)
    weight = (torch.randn(v, c, generator=g, dtype=dtype) * 0.3).requires_grad_()
    labels = torch.randint(0, v, (n,), generator=g)
    labels[torch.rand(n, generator=g) < 0.3] = -100  # decoder padding
    return hidden, weight, labels


@pytest.mark.parametrize("chunk", [1, 7, 16, 53, 1000])
@pytest.mark.parametrize("seed", [0, 1])
def test_loss_and_grads_equal_plain_cross_entropy(chunk, seed):
    hidden, weight, labels = problem(seed)
    fused = linear_cross_entropy(hidden, weight, labels, chunk_rows=chunk)
    plain = F.cross_entropy(hidden @ weight.T, labels, ignore_index=-100)
    torch.testing.assert_close(fused, plain)
    scale = 0.37  # a loss weight or 1 / grad_accum upstream reaches both gradients
    for got, want in zip(
        torch.autograd.grad(scale * fused, (hidden, weight)),
        torch.autograd.grad(scale * plain, (hidden, weight)),
        strict=True,
    ):
        torch.testing.assert_close(got, want)


def test_batched_shape_and_only_one_input_needing_grad():
    hidden, weight, labels = problem(2)
    hidden3 = hidden.detach().reshape(1, 53, 24)  # (B, L, C) as the decoder gives it; no grad wanted here
    fused = linear_cross_entropy(hidden3, weight, labels.reshape(1, 53), chunk_rows=10)
    plain = F.cross_entropy(hidden.detach() @ weight.T, labels)
    torch.testing.assert_close(fused, plain)
    torch.testing.assert_close(torch.autograd.grad(fused, weight)[0], torch.autograd.grad(plain, weight)[0])


def test_no_labelled_rows_give_zero_loss_and_zero_grads():
    hidden, weight, labels = problem(3)
    loss = linear_cross_entropy(hidden, weight, torch.full_like(labels, -100))
    assert float(loss.detach()) == 0.0
    gh, gw = torch.autograd.grad(loss, (hidden, weight))
    assert not gh.any() and not gw.any()


def test_bf16_autocast_stays_close_to_fp32():
    hidden, weight, labels = problem(4, dtype=torch.float32)
    plain = F.cross_entropy(hidden @ weight.T, labels)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused = linear_cross_entropy(hidden, weight, labels, chunk_rows=8)
    assert fused.dtype == torch.float32
    torch.testing.assert_close(fused, plain, rtol=2e-2, atol=2e-2)
    gh, gw = torch.autograd.grad(fused, (hidden, weight))
    assert gh.dtype == hidden.dtype and gw.dtype == weight.dtype
    ph, pw = torch.autograd.grad(plain, (hidden, weight))
    torch.testing.assert_close(gh, ph, rtol=5e-2, atol=2e-3)
    torch.testing.assert_close(gw, pw, rtol=5e-2, atol=2e-3)


def test_model_lm_loss_and_grads_match_the_unfused_head():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(3, 100, (4, 12), generator=g)
    mask = torch.ones_like(ids)
    labels = torch.randint(3, 100, (4, 6), generator=g)
    labels[:, 4:] = -100
    runs = []
    for fused in (False, True):
        torch.manual_seed(0)
        model = GurModel(preset_config("tiny", vocab_size=100, dropout=0.0, attention="sdpa", fused_lm_head=fused))
        loss = model(ids, mask, labels=labels, embed=False)["lm_loss"]
        loss.backward()
        runs.append((loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}))
    (plain, plain_grads), (fused, fused_grads) = runs
    torch.testing.assert_close(fused, plain)
    assert fused_grads.keys() == plain_grads.keys()
    for name, grad in fused_grads.items():
        torch.testing.assert_close(grad, plain_grads[name], rtol=1e-4, atol=1e-6, msg=name)
