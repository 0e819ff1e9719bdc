"""GUR's losses: symmetric in-batch InfoNCE between the two sentences of each pair, and LM + alpha * CL."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from models.gur.packing import SENTENCE_KEYS, mark_sizes_dynamic, pad_label_width
from models.training.measures import TEMPERATURE, compute_loss_from_embeddings, in_batch_accuracy


def chance_accuracy(n: int) -> float:
    return 1.0 / n


def uniform_loss(n: int) -> float:
    """InfoNCE when all logits are equal (identical embeddings): log N."""
    return math.log(n)


def packed_views(batch: dict[str, Tensor], prefix: str) -> dict[str, dict[str, Tensor]]:
    """`{"packed": ...}` for a packed batch (models.gur.packing), else nothing: the model's keyword argument."""
    if f"{prefix}segment_ids" not in batch:
        return {}
    keys = SENTENCE_KEYS + (("decoder_segment_ids",) if not prefix else ())
    return {"packed": {k: batch[prefix + k] for k in keys}}


class GurLoss(nn.Module):
    """LM + alpha * CL for one batch; `objective` is `lm+cl`, `cl` or `lm`.

    The batch holds 2N masked sentences, the N `a` sides then the N `b` sides (see
    `models.gur.pair_data.collate`; packed or padded, the embeddings come in that order); the CL loss
    compares the projections of the two halves, of the masked inputs as in the paper (one encoder
    pass), or of `cl_input_ids` when the batch has them.
    """

    def __init__(
        self, model: nn.Module, objective: str = "lm+cl", alpha: float = 1.0, temperature: float = TEMPERATURE
    ):
        super().__init__()
        if objective not in ("lm+cl", "cl", "lm"):
            raise ValueError(f"unknown objective {objective!r}")
        self.model = model
        self.objective = objective
        self.alpha = alpha
        self.temperature = temperature

    def forward(self, batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        use_lm = self.objective in ("lm+cl", "lm")
        use_cl = self.objective in ("lm+cl", "cl")
        clean = use_cl and "cl_input_ids" in batch  # contrastive loss on unmasked sentences: a second encoder pass
        out: dict[str, Tensor] = {}
        if "segment_ids" in batch and hasattr(self.model, "_orig_mod"):  # packed, into a torch.compile'd model
            batch = pad_label_width(batch)
            mark_sizes_dynamic(batch)
        if use_lm or not clean:
            out = self.model(
                batch["input_ids"],
                batch["attention_mask"],
                labels=batch["labels"] if use_lm else None,
                embed=use_cl and not clean,
                **packed_views(batch, ""),
            )
        if clean:
            views = packed_views(batch, "cl_")
            clean_out = self.model(batch["cl_input_ids"], batch["cl_attention_mask"], embed=True, **views)
            out["embeddings"] = clean_out["embeddings"]
        parts: dict[str, Tensor] = {}
        loss = torch.zeros((), device=batch["input_ids"].device)
        if use_lm:
            parts["lm"] = out["lm_loss"]
            loss = loss + out["lm_loss"]
        if use_cl:
            emb = out["embeddings"].float()  # (2N, D)
            a, b = emb.chunk(2)
            parts["cl"] = compute_loss_from_embeddings(a, b, self.temperature)
            parts["acc"] = torch.tensor(in_batch_accuracy(a.detach(), b.detach()))
            loss = loss + self.alpha * parts["cl"]
        return loss, parts
