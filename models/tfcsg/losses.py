"""TFCSG's losses as plain functions of tensors (Shang et al., §3.2-3.4), plus the contrastive keyword task.

- `contrastive_loss`: SimCSE / TFCSG eq. (1). Row i of `anchors` should be nearest to row i of
  `positives` among all rows of `positives`: CE over cos(a_i, p_j) / tau, one direction (as SimCSE).
  `negative_mask[i, j] = True` removes p_j from row i's negatives (same topic, same text); the
  diagonal is never removed.
- `kl_loss`: eq. (2), KL(softmax(h_t) || softmax(x_hat)) summed over the vector's dimensions and
  averaged over the batch.
- `s2s_loss`: eq. (3), token cross-entropy of the LM head's logits against the keyword tokens,
  ignoring positions labelled -100.
- `similarity_anchor_loss`: the start model's geometry kept: mean squared difference between the
  batch's cosine-similarity matrix under the model being trained and under the frozen start model.
- `distillation_loss`: a teacher's scores kept: KL(teacher || student) over each anchor's in-batch candidates
  (the batch's positives, masked as `contrastive_loss` masks them), each side's cosines over its temperature.
- `weight_anchor_loss`: L2-SP (Li et al. 2018): the squared distance of the weights from the start's.
- `seq2seq_attention_mask`: UniLM's mask for `[CLS] q [SEP] keywords [SEP]`: the first segment
  attends bidirectionally within itself, a second-segment token sees the first segment and the
  second segment up to itself; padding is seen by nobody.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def contrastive_loss(
    anchors: Tensor, positives: Tensor, temperature: float, negative_mask: Tensor | None = None
) -> Tensor:
    """anchors, positives (B, D) any scale (cosine is taken here); negative_mask (B, B) bool, True = not a negative."""
    logits = F.normalize(anchors.float(), dim=-1) @ F.normalize(positives.float(), dim=-1).T / temperature  # (B, B)
    if negative_mask is not None:
        keep_diagonal = torch.eye(len(logits), dtype=torch.bool, device=logits.device)
        logits = logits.masked_fill(negative_mask & ~keep_diagonal, float("-inf"))
    return F.cross_entropy(logits, torch.arange(len(logits), device=logits.device))


def topic_negative_mask(topics: Tensor, text_ids: Tensor | None = None) -> Tensor:
    """(B,) topic ids (-1: unknown, never masked) and optional (B,) text ids -> (B, B) bool: True where i and j
    share a topic or a text (a same-topic question is likely a paraphrase, not a negative)."""
    known = topics >= 0
    mask = (topics[:, None] == topics[None, :]) & known[:, None] & known[None, :]
    if text_ids is not None:
        mask |= text_ids[:, None] == text_ids[None, :]
    return mask


def kl_loss(target_vectors: Tensor, reconstruction: Tensor) -> Tensor:
    """KL(softmax(h_t) || softmax(x_hat)) per row, summed over dimensions, mean over rows; inputs (B, D)."""
    log_p = F.log_softmax(target_vectors.float(), dim=-1)
    log_q = F.log_softmax(reconstruction.float(), dim=-1)
    return (log_p.exp() * (log_p - log_q)).sum(-1).mean()


def s2s_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """logits (..., V), labels (...) with -100 where nothing is predicted: mean token cross-entropy."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)


def similarity_anchor_loss(vectors: Tensor, start_vectors: Tensor) -> Tensor:
    """vectors, start_vectors (B, D), any scale: mean over the B x B entries of (cos - cos_start)^2. Zero when the
    model ranks and spaces the batch exactly as the start model does, whatever else changed."""
    a = F.normalize(vectors.float(), dim=-1)
    b = F.normalize(start_vectors.float(), dim=-1)
    return ((a @ a.T - b @ b.T) ** 2).mean()


def weight_anchor_loss(params: list[Tensor], start_params: list[Tensor]) -> Tensor:
    """Sum over the parameters of ||p - p_start||^2 (same order, same shapes)."""
    return sum(((p.float() - s.float()) ** 2).sum() for p, s in zip(params, start_params, strict=True))


def seq2seq_attention_mask(segment_ids: Tensor, attention_mask: Tensor) -> Tensor:
    """segment_ids (B, T): 0 for `[CLS] q [SEP]`, 1 for `keywords [SEP]`; attention_mask (B, T) 1 = real token.

    Returns (B, T, T) bool, True where query position i may attend to key position j.
    """
    T = segment_ids.shape[1]
    real = attention_mask.bool()
    source_key = (segment_ids == 0) & real  # (B, T): first-segment keys are visible to every real query
    causal = torch.ones(T, T, dtype=torch.bool, device=segment_ids.device).tril()  # j <= i
    target_query = (segment_ids == 1) & real  # (B, T)
    own_left = target_query[:, :, None] & (segment_ids == 1)[:, None, :] & causal & real[:, None, :]
    return (real[:, :, None] & source_key[:, None, :]) | own_left


def distillation_loss(
    anchors: Tensor,
    positives: Tensor,
    teacher_anchors: Tensor,
    teacher_positives: Tensor,
    temperature: float,
    teacher_temperature: float,
    negative_mask: Tensor | None = None,
) -> Tensor:
    """KL(teacher || student) over each anchor's candidates: the batch's positives, as `contrastive_loss` sees
    them (cos / tau, `negative_mask` removing the same rows, never the diagonal). The teacher's distribution is
    softmax(cos_teacher / teacher_temperature) over the same candidates; its vectors carry no gradient. Mean
    over rows; 0 when student and teacher rank and space the candidates alike."""
    student = F.normalize(anchors.float(), dim=-1) @ F.normalize(positives.float(), dim=-1).T / temperature
    teacher = teacher_anchors.float() @ teacher_positives.float().T / teacher_temperature  # (B, B)
    teacher = teacher.detach()
    if negative_mask is not None:
        removed = negative_mask & ~torch.eye(*student.shape, dtype=torch.bool, device=student.device)
        student = student.masked_fill(removed, float("-inf"))
        teacher = teacher.masked_fill(removed, float("-inf"))
    log_p = F.log_softmax(teacher, dim=-1)
    log_q = F.log_softmax(student, dim=-1)
    p = log_p.exp()
    # removed candidates: p = 0 there, and 0 * (-inf - -inf) would be nan
    return torch.where(p > 0, p * (log_p - log_q), torch.zeros_like(p)).sum(-1).mean()
