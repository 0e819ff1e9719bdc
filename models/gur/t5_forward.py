"""T5 encoder and decoder forward passes over transformers' own T5 modules, with a chosen attention kernel.

The weights, layer norms, feed-forward blocks and dropouts are transformers' (`T5Stack.block[i]`);
only the attention call and the masks are ours: the position bias and the segment mask are
folded once per batch (`models.gur.attention.build_bias`) and shared by every layer, and a packed
row's segments never see each other. With padded rows (segment ids = attention mask, decoder
in one segment) the result equals transformers' T5 forward (tests/models/test_attention_impls.py).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from models.gur.attention import AttentionBias, attend, build_bias, position_bias


def compute_dtype(reference: Tensor) -> torch.dtype:
    """The dtype activations have in the attention: autocast's when it is on, else the weights'."""
    device = reference.device.type
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else reference.dtype


def _attention(module: nn.Module, x: Tensor, kv: Tensor, bias: AttentionBias) -> Tensor:
    """One `T5Attention` (its q, k, v, o projections) on x (B, Q, C) against kv (B, K, C) -> (B, Q, C)."""
    B, Q, _ = x.shape
    H, D = module.n_heads, module.key_value_proj_dim
    q = module.q(x).view(B, Q, H, D).transpose(1, 2)  # (B, H, Q, D)
    k = module.k(kv).view(B, kv.shape[1], H, D).transpose(1, 2)  # (B, H, K, D)
    v = module.v(kv).view(B, kv.shape[1], H, D).transpose(1, 2)
    out = attend(q, k, v, bias, module.dropout if module.training else 0.0)  # (B, H, Q, D)
    return module.o(out.transpose(1, 2).reshape(B, Q, H * D))


def _self_bias(stack: nn.Module, kind: str, segments: Tensor, causal: bool, dtype: torch.dtype) -> AttentionBias:
    attn = stack.block[0].layer[0].SelfAttention  # the first layer owns the relative-position embedding
    T = segments.shape[1]
    position = position_bias(
        attn.relative_attention_bias, T, T, bidirectional=not causal, max_distance=attn.relative_attention_max_distance
    )
    return build_bias(kind, segments, segments, causal, position, dtype)


def encode(stack: nn.Module, input_ids: Tensor, segments: Tensor, kind: str) -> Tensor:
    """A `T5Stack` encoder: input_ids, segments (B, T) -> last hidden state (B, T, C)."""
    h = stack.dropout(stack.embed_tokens(input_ids))  # (B, T, C)
    bias = _self_bias(
        stack, kind, segments, causal=False, dtype=compute_dtype(stack.block[0].layer[0].SelfAttention.q.weight)
    )
    for block in stack.block:
        self_layer, ff = block.layer[0], block.layer[-1]
        normed = self_layer.layer_norm(h)
        h = h + self_layer.dropout(_attention(self_layer.SelfAttention, normed, normed, bias))
        h = ff(h)
    return stack.dropout(stack.final_layer_norm(h))


def decode(
    stack: nn.Module, input_ids: Tensor, segments: Tensor, memory: Tensor, memory_segments: Tensor, kind: str
) -> Tensor:
    """A `T5Stack` decoder: causal self-attention within a segment, cross-attention to the same encoder segment."""
    h = stack.dropout(stack.embed_tokens(input_ids))  # (B, L, C)
    dtype = compute_dtype(stack.block[0].layer[0].SelfAttention.q.weight)
    self_bias = _self_bias(stack, kind, segments, causal=True, dtype=dtype)
    cross_bias = build_bias(kind, segments, memory_segments, False, None, dtype)  # T5 cross-attention has no bias
    for block in stack.block:
        self_layer, cross_layer, ff = block.layer
        normed = self_layer.layer_norm(h)
        h = h + self_layer.dropout(_attention(self_layer.SelfAttention, normed, normed, self_bias))
        normed = cross_layer.layer_norm(h)
        h = h + cross_layer.dropout(_attention(cross_layer.EncDecAttention, normed, memory, cross_bias))
        h = ff(h)
    return stack.dropout(stack.final_layer_norm(h))
