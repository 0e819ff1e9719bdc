"""Attention kernels for the GUR T5 with its relative-position bias, and the masks they take.

A mask is described by segment ids, not by a padding mask: `segment_ids` (B, T) numbers each
token's sentence (0 = padding). A query attends to the keys of its own segment, so one rule
covers a padded batch (segment ids = the attention mask, every real token in segment 1) and a
packed one (several sentences per row, a block-diagonal "document" mask). Padding queries
attend to every key: their outputs are never read, and no softmax row is ever fully masked.

T5 adds a learned bias of the relative position (key - query, bucketed) to the raw scores and
does not scale them. Within a segment the relative positions of a packed row are those of the
sentence alone, and across segments the mask blocks the pair, so the bias of a packed row is
the ordinary [heads, q, k] bias of its length: no segment-aware position ids are needed.

Kernels (`models.training.throughput.ATTENTION`, the names a run's `attention` option takes):
- `eager`: scores + bias, softmax, dropout, @ V (transformers' own T5 arithmetic);
- `sdpa`: `F.scaled_dot_product_attention` with bias + mask folded into one additive float mask,
  built once per batch and shared by every layer (cuDNN / memory-efficient kernels on a GPU);
- `flex`: FlexAttention; a `score_mod` reads the precomputed [heads, q, k] bias and a block
  mask from the segment ids skips the blocks outside the document mask. It has no dropout on
  the attention probabilities (the residual and feed-forward dropouts still apply), and torch
  2.13 has no FlexAttention backward on the CPU: it trains on a GPU only, and evaluates anywhere.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor


def relative_position_bucket(relative: Tensor, bidirectional: bool, num_buckets: int, max_distance: int) -> Tensor:
    """T5's bucketing of key - query distances (Raffel et al. 2020; transformers' `_relative_position_bucket`)."""
    buckets = torch.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative > 0).long() * num_buckets
        relative = relative.abs()
    else:
        relative = -relative.clamp(max=0)
    max_exact = num_buckets // 2
    large = (
        max_exact
        + (
            torch.log(relative.float().clamp(min=1) / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).long()
    )
    large = large.clamp(max=num_buckets - 1)
    return buckets + torch.where(relative < max_exact, relative, large)


@lru_cache(maxsize=64)
def _bucket_table(q_len: int, k_len: int, bidirectional: bool, num_buckets: int, max_distance: int, device: str):
    relative = torch.arange(k_len, device=device)[None, :] - torch.arange(q_len, device=device)[:, None]
    return relative_position_bucket(relative, bidirectional, num_buckets, max_distance)  # (Q, K)


def position_bias(
    embedding: torch.nn.Embedding, q_len: int, k_len: int, bidirectional: bool, max_distance: int
) -> Tensor:
    """(H, Q, K) learned bias; the bucket table is computed once per shape and device, the lookup once per batch."""
    buckets = _bucket_table(
        q_len, k_len, bidirectional, embedding.num_embeddings, max_distance, str(embedding.weight.device)
    )
    return embedding(buckets).permute(2, 0, 1)  # (H, Q, K)


def allowed(q_segments: Tensor, k_segments: Tensor, causal: bool) -> Tensor:
    """(B, Q, K) bool: same segment (or a padding query); with `causal`, key <= query too."""
    ok = (q_segments[:, :, None] == k_segments[:, None, :]) | (q_segments[:, :, None] == 0)
    if causal:
        q, k = q_segments.shape[1], k_segments.shape[1]
        ok = ok & torch.ones(q, k, dtype=torch.bool, device=ok.device).tril()
    return ok


@dataclass
class AttentionBias:
    """What one attention call site (encoder self, decoder self, cross) needs, built once per batch."""

    kind: str
    bias: Tensor | None = None  # eager / sdpa: (B, H|1, Q, K) additive float = position bias + mask
    position: Tensor | None = None  # flex: (H, Q, K) position bias, or None (cross-attention)
    block_mask: Any = None  # flex: BlockMask from the segment ids


def build_bias(
    kind: str, q_segments: Tensor, k_segments: Tensor, causal: bool, position: Tensor | None, dtype: torch.dtype
) -> AttentionBias:
    """Fold the position bias (H, Q, K) and the segment mask into what `kind` reads."""
    if kind == "flex":
        return AttentionBias(kind, position=position, block_mask=_block_mask(q_segments, k_segments, causal))
    ok = allowed(q_segments, k_segments, causal)[:, None]  # (B, 1, Q, K)
    additive = torch.zeros(ok.shape, dtype=dtype, device=ok.device).masked_fill(~ok, torch.finfo(dtype).min)
    bias = additive if position is None else position.to(dtype)[None] + additive  # (B, H|1, Q, K)
    return AttentionBias(kind, bias=bias.contiguous())


def attend(q: Tensor, k: Tensor, v: Tensor, bias: AttentionBias, dropout: float) -> Tensor:
    """(B, H, Q, D), (B, H, K, D) x2 -> (B, H, Q, D); T5 scale 1 (the init folds 1/sqrt(d) into the weights)."""
    if bias.kind == "eager":
        scores = torch.matmul(q, k.transpose(2, 3)) + bias.bias  # (B, H, Q, K)
        weights = F.dropout(F.softmax(scores, dim=-1), p=dropout, training=dropout > 0).to(v.dtype)
        return torch.matmul(weights, v)
    if bias.kind == "sdpa":
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias.bias.to(q.dtype), dropout_p=dropout, scale=1.0)
    return _flex(q, k, v, bias)


def _block_mask(q_segments: Tensor, k_segments: Tensor, causal: bool):
    from torch.nn.attention.flex_attention import create_block_mask

    def mask_mod(b, h, qi, ki):
        ok = (q_segments[b, qi] == k_segments[b, ki]) | (q_segments[b, qi] == 0)
        return ok & (ki <= qi) if causal else ok

    B, Q = q_segments.shape
    return create_block_mask(mask_mod, B, None, Q, k_segments.shape[1], device=q_segments.device)


_COMPILED_FLEX = None


def _flex(q: Tensor, k: Tensor, v: Tensor, bias: AttentionBias) -> Tensor:
    from torch.nn.attention.flex_attention import flex_attention

    position = bias.position
    if position is not None:
        position = position.to(q.dtype)

        def score_mod(score, b, h, qi, ki):
            return score + position[h, qi, ki]
    else:
        score_mod = None
    if q.device.type == "cuda" and not torch.compiler.is_compiling():
        global _COMPILED_FLEX
        if _COMPILED_FLEX is None:  # fused kernels only when compiled; the eager fallback materialises scores
            _COMPILED_FLEX = torch.compile(flex_attention)
        return _COMPILED_FLEX(q, k, v, score_mod=score_mod, block_mask=bias.block_mask, scale=1.0)
    with warnings.catch_warnings():  # CPU evaluation: the unfused reference path is expected here
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=bias.block_mask, scale=1.0)
