"""Transformer STS scorers: cross-encoders, siamese sentence encoders and siamese causal LMs.

Each is an `nn.Module` with `forward(a, b) -> (B,)` predictions on the [0, 1] scale, trained by
`models.sts.train.train_scorer`:

- `CrossEncoder`: the pair as one input, [CLS] -> linear (the survey's BERT rows) or
  [CLS] -> Linear-ReLU-Linear-sigmoid (its "MLP + sigmoid" rows);
- `SiameseEncoder`: a sentence-transformers model on each sentence, cosine of the two embeddings
  (Sentence-BERT with its cosine-similarity loss; zero-shot when not trained);
- `SiameseCausalLM`: a decoder-only LM on each sentence, mean pooling over real tokens, cosine
  (the survey's S-LLM); `lora=True` trains only LoRA adapters (r=16, alpha=32 on the attention
  and MLP projections, as the survey).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def require_folder(path: str | Path, what: str) -> Path:
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"{what} folder not found: {folder}")
    return folder.resolve()


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of the hidden states of real tokens: (B, T, H), (B, T) -> (B, H)."""
    mask = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)


class CrossEncoder(nn.Module):
    def __init__(
        self,
        folder: str | Path,
        head: str = "linear",
        max_len: int = 128,
        seed: int = 0,
        pooling: str = "cls",
        symmetric: bool = False,
    ):
        from transformers import AutoModel, AutoTokenizer

        super().__init__()
        folder = require_folder(folder, "encoder")
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.encoder = AutoModel.from_pretrained(str(folder))
        self.max_len, self.head_kind, self.pooling, self.symmetric = max_len, head, pooling, symmetric
        if pooling not in ("cls", "mean"):
            raise ValueError(f"cross-encoder pooling {pooling!r}: expected 'cls' or 'mean'")
        width = self.encoder.config.hidden_size
        torch.manual_seed(seed)  # the new head's weights
        if head == "linear":
            self.head = nn.Linear(width, 1)
        elif head == "mlp":
            self.head = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1), nn.Sigmoid())
        else:
            raise ValueError(f"cross-encoder head {head!r}: expected 'linear' or 'mlp'")

    def score(self, a: list[str], b: list[str]) -> torch.Tensor:
        device = next(self.parameters()).device
        batch = self.tokenizer(a, b, truncation=True, max_length=self.max_len, padding=True, return_tensors="pt")
        batch = batch.to(device)
        hidden = self.encoder(**batch).last_hidden_state  # (B, T, H)
        pooled = hidden[:, 0] if self.pooling == "cls" else mean_pool(hidden, batch["attention_mask"])
        return self.head(pooled).squeeze(-1)  # (B,)

    def forward(self, a: list[str], b: list[str]) -> torch.Tensor:
        """`symmetric`: the order of a pair carries no meaning, so training sees a random order (torch's
        seeded generator) and prediction averages both orders."""
        if not self.symmetric:
            return self.score(a, b)
        if self.training:
            swap = torch.rand(len(a)) < 0.5
            first = [y if s else x for x, y, s in zip(a, b, swap.tolist(), strict=True)]
            second = [x if s else y for x, y, s in zip(a, b, swap.tolist(), strict=True)]
            return self.score(first, second)
        return (self.score(a, b) + self.score(b, a)) / 2


class SiameseEncoder(nn.Module):
    def __init__(self, folder: str | Path, max_len: int = 128):
        from sentence_transformers import SentenceTransformer

        super().__init__()
        self.model = SentenceTransformer(str(require_folder(folder, "encoder")), device="cpu")
        self.model.max_seq_length = max_len

    def embed(self, texts: list[str]) -> torch.Tensor:
        prepare = getattr(self.model, "preprocess", None) or self.model.tokenize  # `tokenize` before 6.x
        device = next(self.parameters()).device
        features = {k: v.to(device) if torch.is_tensor(v) else v for k, v in prepare(texts).items()}
        return self.model(features)["sentence_embedding"]  # (B, H)

    def forward(self, a: list[str], b: list[str]) -> torch.Tensor:
        return nn.functional.cosine_similarity(self.embed(a), self.embed(b), dim=-1)  # (B,)


class SiameseCausalLM(nn.Module):
    def __init__(self, folder: str | Path, max_len: int = 128, lora: bool = False, seed: int = 0):
        from transformers import AutoModel, AutoTokenizer

        super().__init__()
        folder = require_folder(folder, "causal LM")
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        if self.tokenizer.pad_token is None:  # causal LMs often ship without one; padding is masked anyway
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "right"
        torch.manual_seed(seed)
        self.encoder = AutoModel.from_pretrained(str(folder), dtype=torch.float32)
        self.max_len = max_len
        if lora:
            self.encoder = add_lora(self.encoder)

    def embed(self, texts: list[str]) -> torch.Tensor:
        device = next(self.parameters()).device
        batch = self.tokenizer(texts, truncation=True, max_length=self.max_len, padding=True, return_tensors="pt")
        batch = batch.to(device)
        hidden = self.encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        return mean_pool(hidden, batch["attention_mask"])  # (B, H)

    def forward(self, a: list[str], b: list[str]) -> torch.Tensor:
        return nn.functional.cosine_similarity(self.embed(a), self.embed(b), dim=-1)  # (B,)

    def save_adapter(self, folder: str | Path) -> None:
        self.encoder.save_pretrained(str(folder))

    def load_adapter(self, folder: str | Path) -> None:
        """Replace the LoRA weights by those saved in `folder` (the base weights are untouched)."""
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        set_peft_model_state_dict(self.encoder, load_file(str(Path(folder) / "adapter_model.safetensors")))


def add_lora(model: nn.Module, r: int = 16, alpha: int = 32) -> nn.Module:
    """LoRA adapters on the attention and MLP projections; every other weight frozen."""
    from peft import LoraConfig, get_peft_model

    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    targets = [t for t in LORA_TARGETS if t in present]
    if not targets:
        raise ValueError(f"no LoRA target module ({', '.join(LORA_TARGETS)}) in {type(model).__name__}")
    return get_peft_model(model, LoraConfig(r=r, lora_alpha=alpha, lora_dropout=0.0, target_modules=targets))


def unk_rate(tokenizer, texts: list[str]) -> float:
    """Share of tokens the tokenizer maps to its unknown token (where an English vocabulary fails on zh)."""
    unk = tokenizer.unk_token_id
    if unk is None:
        return 0.0
    ids = [i for t in texts for i in tokenizer(t, add_special_tokens=False)["input_ids"]]
    return sum(i == unk for i in ids) / max(1, len(ids))
