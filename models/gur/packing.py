"""Sequence packing: several sentences per row, so no FLOPs go to padding.

A packed batch numbers its sentences 0..n-1 in the order of the padded batch (the `a` sides,
then the `b` sides) and marks every token with its sentence number + 1 (`segment_ids`, 0 =
padding). The encoder attends within a segment only (models.gur.attention), each sentence's span
targets sit in the same row of the decoder under the same segment number (causal self-attention
within the segment, cross-attention to its own encoder segment), and pooling reads each
segment on its own, so the contrastive loss still sees one vector per sentence. Packing draws
no random numbers: a packed batch and the padded batch of the same draws hold the same
sentences, masks and targets (tests/models/test_packing.py compares their vectors and losses).

Keys (R packed rows of width T, decoder width L, n sentences):
`input_ids`, `attention_mask`, `segment_ids` (R, T); `labels`, `decoder_segment_ids` (R, L);
`sentence_starts`, `sentence_ends` (n,): flat indices into the (R * T) tokens of each sentence's
first and last token. A `cl_` prefix marks the same for the clean views (encoder only).
"""

from __future__ import annotations

import torch
from torch import Tensor

SENTENCE_KEYS = ("segment_ids", "sentence_starts", "sentence_ends")


def first_fit_decreasing(lengths: list[int], width: int) -> list[list[int]]:
    """Rows of item indices, each row's lengths summing to <= width; longest first, ties by index (deterministic)."""
    if any(n > width for n in lengths):
        raise ValueError(f"a sequence of {max(lengths)} tokens does not fit a packed row of {width}")
    rows: list[list[int]] = []
    free: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        for r, space in enumerate(free):
            if lengths[i] <= space:
                rows[r].append(i)
                free[r] -= lengths[i]
                break
        else:
            rows.append([i])
            free.append(width - lengths[i])
    return [sorted(r) for r in rows]


def _round8(n: int) -> int:
    return (n + 7) // 8 * 8


def pack_encoder(
    seqs: list[list[int]], width: int, pad_id: int, fixed_width: bool, prefix: str = ""
) -> tuple[dict, list[list[int]]]:
    """Token sequences (each <= width) -> packed encoder tensors, and the rows' sentence indices."""
    rows = first_fit_decreasing([len(s) for s in seqs], width)
    used = max(sum(len(seqs[i]) for i in row) for row in rows)
    T = width if fixed_width else min(width, _round8(used))
    ids = torch.full((len(rows), T), pad_id, dtype=torch.long)
    seg = torch.zeros((len(rows), T), dtype=torch.long)
    starts = torch.zeros(len(seqs), dtype=torch.long)
    ends = torch.zeros(len(seqs), dtype=torch.long)
    for r, row in enumerate(rows):
        pos = 0
        for i in row:
            n = len(seqs[i])
            ids[r, pos : pos + n] = torch.tensor(seqs[i])
            seg[r, pos : pos + n] = i + 1
            starts[i], ends[i] = r * T + pos, r * T + pos + n - 1
            pos += n
    out = {
        f"{prefix}input_ids": ids,
        f"{prefix}attention_mask": (seg > 0).long(),
        f"{prefix}segment_ids": seg,
        f"{prefix}sentence_starts": starts,
        f"{prefix}sentence_ends": ends,
    }
    return out, rows


def pack_targets(targets: list[list[int]], rows: list[list[int]]) -> dict[str, Tensor]:
    """Each row's sentences' span targets, one after the other, under the sentences' segment numbers."""
    L = _round8(max(1, max(sum(len(targets[i]) for i in row) for row in rows)))
    labels = torch.full((len(rows), L), -100, dtype=torch.long)
    seg = torch.zeros((len(rows), L), dtype=torch.long)
    for r, row in enumerate(rows):
        pos = 0
        for i in row:
            n = len(targets[i])
            if n:
                labels[r, pos : pos + n] = torch.tensor(targets[i])
                seg[r, pos : pos + n] = i + 1
            pos += n
    return {"labels": labels, "decoder_segment_ids": seg}


def mark_sizes_dynamic(batch: dict[str, Tensor]) -> None:
    """Tell `torch.compile` before the first batch which sizes of a packed batch vary from batch to batch: the row
    count and the label width (and the sentence count, fixed by the batch size in training, so that a batch of
    another size compiles once too), so a compiled model compiles once (left to find out, dynamo compiles again
    at the first new row count and at the first new label width, each a whole compile more: the results log,
    docs/results/, the third GPU window). The encoder width stays static: compiling implies fixed shapes, so
    kernels keep it as a constant.
    GurLoss calls this for a compiled model only: it imports dynamo."""
    for key, tensor in batch.items():
        dims = (0, 1) if key.removeprefix("cl_") in ("labels", "decoder_segment_ids") else (0,)
        for dim in dims:
            torch._dynamo.maybe_mark_dynamic(tensor, dim)


def pad_label_width(batch: dict[str, Tensor], multiple: int = 16) -> dict[str, Tensor]:
    """The batch with `labels` (-100) and `decoder_segment_ids` (0) padded on the right to a multiple of `multiple`
    (a batch without labels as it is).

    For a compiled model: CUDA's memory-efficient attention backward guards on the decoder width modulo 16, so
    widths rounded to 8 compile the LM loss twice, once per remainder (8 and 0; docs/results/, the third GPU
    window). The padding is ignored
    targets at the end of a row, which no earlier decoder position attends to: the loss is unchanged."""
    extra = -batch["labels"].shape[1] % multiple if "labels" in batch else 0
    if not extra:
        return batch
    out = dict(batch)
    for key, fill in (("labels", -100), ("decoder_segment_ids", 0)):
        if key in batch:
            out[key] = torch.nn.functional.pad(batch[key], (0, extra), value=fill)
    return out


def shift_right_in_segments(labels: Tensor, segments: Tensor, start_id: int, pad_id: int) -> Tensor:
    """Teacher-forcing decoder inputs: each segment's labels shifted right by one, starting with `start_id`.

    With one segment per row this is T5's `_shift_right`; -100 becomes `pad_id` as there."""
    prev = labels.roll(1, dims=1)
    same = segments == segments.roll(1, dims=1)
    same[:, 0] = False
    return torch.where(same, prev, torch.full_like(labels, start_id)).masked_fill(prev.eq(-100) & same, pad_id)


def pool_segments(hidden: Tensor, segments: Tensor, starts: Tensor, ends: Tensor, mode: str) -> Tensor:
    """(R, T, C) packed states -> (n, C): each sentence's first token (`cls`), last (`eos`) or its mean."""
    flat = hidden.reshape(-1, hidden.shape[-1])  # (R * T, C)
    if mode == "cls":
        return flat[starts]
    if mode == "eos":
        return flat[ends]
    if mode == "mean":
        seg = segments.reshape(-1)
        real = seg > 0
        sums = torch.zeros((starts.shape[0], flat.shape[1]), dtype=flat.dtype, device=flat.device)
        sums = sums.index_add(0, seg[real] - 1, flat[real])
        return sums / (ends - starts + 1).to(flat.dtype)[:, None]
    raise ValueError(f"unknown pooling {mode!r}")
