"""A frozen teacher encoder for distillation: a sentence-transformers folder (all-mpnet-base-v2, any the user
names) read as its authors saved it (its transformer, its pooling, normalised), kept off the trained module tree.

    teacher = Teacher.load(folder)
    ids, mask = teacher.tokenize(texts, max_len)          # its own tokenizer: a student's ids mean nothing to it
    vectors = teacher.embed(ids, mask)                    # (B, D) L2-normalised, no gradient

It is never trained, never in a checkpoint and never wrapped by DDP (as the anchors' frozen start,
models/tfcsg/model.py: FrozenStart); it moves to the batch's device on first use.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn


def folder_pooling(folder: Path) -> str:
    """The pooling a sentence-transformers folder declares (`modules.json` -> its Pooling module's config); a
    plain Hugging Face folder pools by the mean, as sentence-transformers itself does."""
    modules = folder / "modules.json"
    if not modules.is_file():
        return "mean"
    for module in json.loads(modules.read_text(encoding="utf-8")):
        if module.get("type", "").endswith("Pooling"):
            config = json.loads((folder / module["path"] / "config.json").read_text(encoding="utf-8"))
            for mode, key in (("cls", "pooling_mode_cls_token"), ("max", "pooling_mode_max_tokens")):
                if config.get(key):
                    return mode
            return "mean"
    return "mean"


def pool(hidden: Tensor, mask: Tensor, mode: str) -> Tensor:
    """(B, T, C) states -> (B, C) under `mode`; right padding (the tokenizer's)."""
    if mode == "cls":
        return hidden[:, 0]
    keep = mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    if mode == "max":
        return hidden.masked_fill(keep == 0, torch.finfo(hidden.dtype).min).amax(1)
    return (hidden * keep).sum(1) / keep.sum(1).clamp(min=1)


@dataclass
class Teacher:
    folder: Path
    tokenizer: object
    encoder: nn.Module
    pooling: str

    @classmethod
    def load(cls, folder: str | Path) -> Teacher:
        from transformers import AutoModel, AutoTokenizer

        path = Path(folder)
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"teacher {path}: not a model folder (no config.json)")
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        encoder = AutoModel.from_pretrained(str(path), local_files_only=True).eval().requires_grad_(False)
        return cls(path, tokenizer, encoder, folder_pooling(path))

    def tokenize(self, texts: list[str], max_len: int) -> tuple[Tensor, Tensor]:
        positions = int(getattr(self.encoder.config, "max_position_embeddings", max_len) or max_len)
        length = min(max_len, positions - 2)  # RoBERTa-style models (mpnet) offset their positions by 2
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=length, return_tensors="pt")
        return enc["input_ids"], enc["attention_mask"]

    @torch.no_grad()
    def embed(self, ids: Tensor, mask: Tensor) -> Tensor:
        self.encoder.to(ids.device)
        hidden = self.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        return nn.functional.normalize(pool(hidden, mask, self.pooling).float(), dim=-1)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.encoder.parameters())
