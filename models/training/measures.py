"""What the training loop measures on any method's batches: the symmetric in-batch InfoNCE, in-batch retrieval
accuracy (the held-out check) and the real tokens a batch holds."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

TEMPERATURE = 0.1


def compute_loss_from_embeddings(a: Tensor, b: Tensor, temperature: float = TEMPERATURE) -> Tensor:
    """Symmetric in-batch InfoNCE (CLIP's loss with a fixed temperature), GUR eq. (2).

    `a` and `b` are (N, D) L2-normalised embeddings; row i of `a` and row i of `b` are a
    positive pair and the other N-1 rows of the other side are its negatives. Convention:
    logits = (a @ b.T) / temperature, i.e. cosine similarity divided by the temperature
    (0.1 multiplies cosines by 10), and

        loss = (CE(logits, arange(N)) + CE(logits.T, arange(N))) / 2

    No a-a or b-b negatives (as in CLIP and the reference code). Identical rows give log N;
    orthonormal aligned pairs give log(1 + (N-1) e^(-1/temperature)), about 0.
    """
    logits = a @ b.T / temperature  # (N, N)
    target = torch.arange(a.shape[0], device=a.device)
    return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2


def in_batch_accuracy(a: Tensor, b: Tensor) -> float:
    """Fraction of rows i whose nearest `b` row (by dot product) is b_i, averaged over both directions."""
    sim = a @ b.T  # (N, N)
    target = torch.arange(a.shape[0], device=a.device)
    hits = (sim.argmax(dim=1) == target).float().mean() + (sim.argmax(dim=0) == target).float().mean()
    return float(hits) / 2


def count_tokens(batch: dict[str, torch.Tensor]) -> int:
    """Real (non-pad) encoder input tokens plus real target tokens (TFCSG batches: every input's mask)."""
    masks = sum(
        int(v.sum())
        for k, v in batch.items()
        if k.endswith("attention_mask") and not k.startswith(("cl_", "teacher_"))  # a teacher's tokens train nothing
    )
    return masks + int((batch["labels"] != -100).sum()) if "labels" in batch else masks
