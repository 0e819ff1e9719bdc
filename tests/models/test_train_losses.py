"""InfoNCE on hand-made tensors; the temperature convention is cosine / 0.1."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from models.training.measures import compute_loss_from_embeddings, in_batch_accuracy


def test_aligned_orthonormal_pairs_give_almost_zero():
    a = torch.eye(4)  # cos = 1 on the diagonal, 0 elsewhere: logits 10 / 0
    loss = compute_loss_from_embeddings(a, a.clone())
    assert loss.item() == pytest.approx(math.log(1 + 3 * math.exp(-10)), rel=1e-3)  # = 1.4e-4 (float32)
    assert loss.item() < 1e-3


def test_identical_rows_give_log_n():
    a = F.normalize(torch.ones(8, 16), dim=-1)  # every logit equal -> uniform softmax over 8
    assert compute_loss_from_embeddings(a, a).item() == pytest.approx(math.log(8), rel=1e-6)


def test_matches_the_formula_and_is_symmetric():
    g = torch.Generator().manual_seed(0)
    a = F.normalize(torch.randn(5, 8, generator=g), dim=-1)
    b = F.normalize(torch.randn(5, 8, generator=g), dim=-1)
    logits = a @ b.T / 0.1
    by_row = -(logits.diag() - logits.logsumexp(dim=1)).mean()  # a_i against all b_j
    by_col = -(logits.diag() - logits.logsumexp(dim=0)).mean()  # b_i against all a_j
    assert compute_loss_from_embeddings(a, b).item() == pytest.approx(((by_row + by_col) / 2).item(), rel=1e-5)
    assert compute_loss_from_embeddings(b, a).item() == pytest.approx(compute_loss_from_embeddings(a, b).item())
    assert compute_loss_from_embeddings(a, b, temperature=1.0) < compute_loss_from_embeddings(a, b)


def test_in_batch_accuracy():
    a = torch.eye(4)
    assert in_batch_accuracy(a, a) == 1.0
    assert in_batch_accuracy(a, a[[1, 0, 2, 3]]) == 0.5  # two of four rows swapped, both directions
