"""TFCSG's losses against values computed by hand on small tensors, and the seq2seq mask's pattern."""

from __future__ import annotations

import math

import pytest
import torch

from models.tfcsg.losses import (
    contrastive_loss,
    kl_loss,
    s2s_loss,
    seq2seq_attention_mask,
    topic_negative_mask,
)
from models.tfcsg.model import parse_losses


def test_contrastive_loss_by_hand():
    # unit vectors at 0, 90 and 180 degrees: cosines are 1, 0, -1
    a = torch.tensor([[1.0, 0.0], [0.0, 2.0]])  # scale does not matter: cosine
    p = torch.tensor([[3.0, 0.0], [0.0, 1.0]])
    tau = 0.5
    # row 0: logits (1/tau, 0); row 1: logits (0, 1/tau)
    expected = -math.log(math.exp(2) / (math.exp(2) + 1))
    assert contrastive_loss(a, p, tau).item() == pytest.approx(expected, rel=1e-6)
    # one direction only (SimCSE): anchor 0 against positives [p0, p1] where p1 is the negative at 180 degrees
    p2 = torch.tensor([[1.0, 0.0], [-1.0, 0.0]])
    row0 = -math.log(math.exp(2) / (math.exp(2) + math.exp(-2)))
    row1 = -math.log(math.exp(0) / (math.exp(0) + math.exp(0)))  # anchor (0, 2) is orthogonal to both
    assert contrastive_loss(a, p2, tau).item() == pytest.approx((row0 + row1) / 2, rel=1e-6)


def test_masked_negatives_leave_the_denominator_and_the_diagonal_stays():
    torch.manual_seed(0)
    a, p = torch.randn(4, 8), torch.randn(4, 8)
    tau = 0.1
    cos = torch.nn.functional.normalize(a, dim=-1) @ torch.nn.functional.normalize(p, dim=-1).T / tau
    topics = torch.tensor([0, 0, 1, -1])  # rows 0 and 1 share a topic; row 3 has none
    mask = topic_negative_mask(topics)
    assert mask.tolist() == [
        [True, True, False, False],
        [True, True, False, False],
        [False, False, True, False],
        [False, False, False, False],
    ]
    by_hand = []
    for i in range(4):
        keep = [j for j in range(4) if j == i or not mask[i, j]]
        by_hand.append(-(cos[i, i] - torch.logsumexp(cos[i, keep], 0)))
    assert contrastive_loss(a, p, tau, mask).item() == pytest.approx(torch.stack(by_hand).mean().item(), rel=1e-5)
    assert contrastive_loss(a, p, tau, mask).item() < contrastive_loss(a, p, tau).item()  # fewer negatives


def test_same_text_is_never_a_negative():
    mask = topic_negative_mask(torch.tensor([-1, -1, -1]), torch.tensor([5, 7, 5]))
    assert mask.tolist() == [[True, False, True], [False, True, False], [True, False, True]]


def test_kl_loss_by_hand():
    h_t = torch.tensor([[1.0, 2.0, 0.5]])
    x_hat = torch.tensor([[0.2, 0.9, 0.4]])
    p = torch.softmax(h_t, -1)[0].tolist()
    q = torch.softmax(x_hat, -1)[0].tolist()
    expected = sum(pi * math.log(pi / qi) for pi, qi in zip(p, q, strict=True))
    assert kl_loss(h_t, x_hat).item() == pytest.approx(expected, rel=1e-6)
    assert kl_loss(h_t, h_t).item() == pytest.approx(0.0, abs=1e-7)
    # the paper's x_hat is a sigmoid output: its softmax is nearly uniform (every entry within e of the others)
    sigmoid_out = torch.sigmoid(torch.randn(1, 384) * 10)
    probs = torch.softmax(sigmoid_out, -1)
    assert (probs.max() / probs.min()).item() < math.e + 1e-4


def test_s2s_loss_by_hand():
    logits = torch.tensor([[[2.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])  # (1, 2, 3)
    labels = torch.tensor([[0, -100]])  # the second position predicts nothing
    expected = -math.log(math.exp(2) / (math.exp(2) + 2))
    assert s2s_loss(logits, labels).item() == pytest.approx(expected, rel=1e-6)
    assert s2s_loss(logits[0], labels[0]).item() == pytest.approx(expected, rel=1e-6)  # gathered (N, V) too


def test_seq2seq_mask_pattern():
    # [CLS] q1 q2 [SEP] k1 k2 [SEP] [PAD]
    segments = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 0]])
    real = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 0]])
    mask = seq2seq_attention_mask(segments, real)[0].int().tolist()
    assert mask == [
        [1, 1, 1, 1, 0, 0, 0, 0],  # the source sees the source only, both ways
        [1, 1, 1, 1, 0, 0, 0, 0],
        [1, 1, 1, 1, 0, 0, 0, 0],
        [1, 1, 1, 1, 0, 0, 0, 0],
        [1, 1, 1, 1, 1, 0, 0, 0],  # a target token sees the source and the target up to itself
        [1, 1, 1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 1, 1, 0],
        [0, 0, 0, 0, 0, 0, 0, 0],  # padding sees nothing and is seen by nobody
    ]


def test_parse_losses():
    assert parse_losses("cl+kl+s2s") == ("cl", "kl", "s2s")
    assert parse_losses(" kw ") == ("kw",)
    for bad in ("", "cl+cl", "cl+mlm"):
        with pytest.raises(ValueError, match="expected names"):
            parse_losses(bad)
