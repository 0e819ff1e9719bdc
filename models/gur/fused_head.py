"""LM head + cross-entropy in row chunks: the (tokens, vocab) logits never exist in full.

`linear_cross_entropy(hidden, weight, labels)` equals
`F.cross_entropy(hidden @ weight.T, labels, ignore_index=-100)` (mean over the labelled rows) in
value and gradients. Only labelled rows are projected (decoder padding costs no vocabulary
GEMM), and they go through in chunks of about `CHUNK_ELEMENTS / vocab` rows. The gradients are
computed in the forward pass, chunk by chunk, while each chunk's logits exist (softmax - one-hot,
then two GEMMs), and the backward pass only scales them by the incoming gradient: three GEMMs in
all, as the unfused head, and peak memory one chunk of logits instead of all of them (Liger
Kernel's fused linear cross-entropy does the same in Triton; this is plain PyTorch).
"""

from __future__ import annotations

import torch
from torch import Tensor

CHUNK_ELEMENTS = 2**26  # logits per chunk: 2**28 bytes in fp32, about 2,000 rows of a 32k vocabulary


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, labels: Tensor, chunk: int) -> Tensor:
        n = hidden.shape[0]
        need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        acc = torch.promote_types(hidden.dtype, torch.float32)  # softmax and sums in fp32 at least
        grad_h = torch.empty_like(hidden) if need_h else None
        grad_w = torch.zeros(weight.shape, dtype=acc, device=weight.device) if need_w else None
        total = torch.zeros((), dtype=acc, device=hidden.device)
        for s in range(0, n, chunk):
            h, y = hidden[s : s + chunk], labels[s : s + chunk]
            raw = h @ weight.T  # (c, V), in autocast's dtype when it is on
            gemm_dtype = raw.dtype
            logits = raw.to(acc)
            del raw  # one chunk of logits alive at a time: the softmax below works in place
            lse = torch.logsumexp(logits, dim=-1)  # (c,)
            total += (lse - logits.gather(1, y[:, None]).squeeze(1)).sum()
            if need_h or need_w:
                g = logits.sub_(lse[:, None]).exp_()  # d(sum of CE)/d(logits) = softmax - one-hot
                g[torch.arange(len(y), device=g.device), y] -= 1
                g = g.div_(max(n, 1)).to(gemm_dtype)
                if need_h:
                    grad_h[s : s + chunk] = (g @ weight.to(g.dtype)).to(hidden.dtype)  # (c, C)
                if need_w:
                    grad_w += (g.T @ h.to(g.dtype)).to(acc)  # (V, C)
        ctx.save_for_backward(*(t for t in (grad_h, grad_w) if t is not None))
        ctx.has = (need_h, need_w)
        ctx.weight_dtype = weight.dtype
        return total / max(n, 1)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        saved = list(ctx.saved_tensors)
        grad_h = saved.pop(0) * grad_out if ctx.has[0] else None
        grad_w = (saved.pop(0) * grad_out).to(ctx.weight_dtype) if ctx.has[1] else None
        return grad_h, grad_w, None, None


@torch.compiler.disable  # a Python loop over a data-dependent number of rows: left out of compiled graphs
def linear_cross_entropy(hidden: Tensor, weight: Tensor, labels: Tensor, chunk_rows: int = 0) -> Tensor:
    """hidden (..., C), weight (V, C), labels (...) with -100 = ignored -> mean CE over labelled rows (0 if none)."""
    hidden = hidden.reshape(-1, hidden.shape[-1])
    labels = labels.reshape(-1)
    keep = labels != -100
    chunk = chunk_rows or max(64, CHUNK_ELEMENTS // weight.shape[0])
    return _LinearCrossEntropy.apply(hidden[keep], weight, labels[keep], chunk)
