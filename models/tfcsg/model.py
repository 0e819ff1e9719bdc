"""The TFCSG / SimCSE model and its multi-task loss (Shang et al. §3; Gao et al. 2021 for SimCSE).

One pretrained encoder (any local BERT-family folder; default the MiniLM the product ships) is
shared by every task:
- `cl`  (eq. 1) SimCSE on the question: two dropout views in one pass, in-batch negatives, cos / tau;
- `kl`  (eq. 2) an auto-encoder of the question vector, z = act(W1 h_q + b1), x_hat = act(W2 z + b2), and
        KL(softmax(h_t) || softmax(x_hat)) with h_t the encoder's vector of the keyword sequence;
- `s2s` (eq. 3) keyword generation UniLM-style in the same encoder: `[CLS] q [SEP] keywords [SEP]` under
        a seq2seq attention mask, token cross-entropy through an LM head on the second segment. A
        checkpoint without an LM head (MiniLM is one) gets BERT's head with the decoder tied to the
        input embeddings and the transform newly initialised (`lm_head_loaded` says which);
- `kw`  the contrastive keyword task: each question's positive is its own keyword sequence.
Two optional anchors keep the start model's general-purpose geometry while the tasks above adapt it
(both off by default; the start is a frozen copy of `init_from`, never saved in checkpoints):
- `anchor` (`sim_anchor_weight`): the question batch's cosine-similarity matrix under the model should
  stay the start model's (`similarity_anchor_loss`);
- `l2sp` (`l2sp_weight`): the encoder's weights are pulled toward the start's (`weight_anchor_loss`).
A teacher (`teacher`: a frozen larger encoder, models/training/teacher.py) adds `teach` (`teach_weight`) beside
`kw`: each query's distribution over the batch's passages under the model should be the teacher's
(`distillation_loss`), so the student learns how near each hard negative is, not only which passage is right.
`negatives="topic-masked"` removes in-batch negatives that share the question's GSDMM topic (or its
text) from `cl` and `kw`: on a corpus of few topics a batch holds several same-topic questions,
which are mostly paraphrases, and plain SimCSE pushes them apart.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import Tensor, nn

from models.gur.model import pool
from models.tfcsg.losses import (
    contrastive_loss,
    distillation_loss,
    kl_loss,
    s2s_loss,
    seq2seq_attention_mask,
    similarity_anchor_loss,
    topic_negative_mask,
    weight_anchor_loss,
)
from models.training.measures import in_batch_accuracy

LOSSES = ("cl", "kl", "s2s", "kw")
NEGATIVES = ("all", "topic-masked")
KL_ACTIVATIONS = ("sigmoid", "linear")


def parse_losses(spec: str) -> tuple[str, ...]:
    """'cl+kl+s2s' -> ('cl', 'kl', 's2s'); unknown or repeated names raise."""
    names = tuple(s.strip() for s in spec.split("+") if s.strip())
    unknown = [n for n in names if n not in LOSSES]
    if not names or unknown or len(set(names)) != len(names):
        raise ValueError(f"losses {spec!r}: expected names from {LOSSES} joined by '+', e.g. 'cl+kl+s2s'")
    return names


@contextmanager
def _quiet_transformers():
    """A missing LM head is expected here; transformers prints a load report table for it."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


class TfcsgModel(nn.Module):
    """Encoder + LM head (for `s2s`) + auto-encoder (for `kl`); `embed` gives L2-normalised sentence vectors."""

    def __init__(
        self,
        init_from: str,
        pooling: str = "mean",
        ae_dim: int = 256,
        kl_activation: str = "sigmoid",
        dropout: float | None = None,
        load_weights: bool = True,
        attention_dropout: float | None = None,
    ):
        super().__init__()
        from transformers import AutoConfig, AutoModelForMaskedLM

        if kl_activation not in KL_ACTIVATIONS:
            raise ValueError(f"kl_activation must be one of {KL_ACTIVATIONS}, got {kl_activation!r}")
        config = AutoConfig.from_pretrained(init_from)
        if dropout is not None:  # SimCSE's augmentation is the encoder's dropout: 0.1 in BERT and MiniLM
            config.hidden_dropout_prob = config.attention_probs_dropout_prob = dropout
        if attention_dropout is not None:  # 0: the fused attention kernel, no T x T scores kept (config.py)
            if not 0 <= attention_dropout < 1:
                raise ValueError(f"attention_dropout must be within [0, 1), got {attention_dropout}")
            config.attention_probs_dropout_prob = attention_dropout
        with _quiet_transformers():
            if load_weights:
                mlm, info = AutoModelForMaskedLM.from_pretrained(init_from, config=config, output_loading_info=True)
                self.lm_head_loaded = not any(k.startswith(("cls.", "lm_head.")) for k in info["missing_keys"])
            else:
                mlm, self.lm_head_loaded = AutoModelForMaskedLM.from_config(config), False
        self.init_from = init_from
        self.mlm = mlm
        self.encoder = mlm.base_model
        self.pooling = pooling
        d = config.hidden_size
        self.kl_activation = kl_activation
        self.ae = nn.Sequential(nn.Linear(d, ae_dim), nn.Sigmoid(), nn.Linear(ae_dim, d))

    def hidden(self, input_ids: Tensor, attention_mask: Tensor, **kwargs) -> Tensor:
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state

    def sentence(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """(B, T) -> (B, D) pooled vectors, not normalised (the KL task reads their scale)."""
        return pool(self.hidden(input_ids, attention_mask), attention_mask, self.pooling)

    @torch.no_grad()
    def embed(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        return nn.functional.normalize(self.sentence(input_ids, attention_mask).float(), dim=-1)

    def reconstruct(self, h_q: Tensor) -> Tensor:
        x_hat = self.ae(h_q)
        return torch.sigmoid(x_hat) if self.kl_activation == "sigmoid" else x_hat

    def s2s_logits(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """Logits at the labelled positions only (the vocabulary projection is the costly part) and their labels."""
        ids, mask, segments = batch["s2s_input_ids"], batch["s2s_attention_mask"], batch["s2s_segments"]
        allowed = seq2seq_attention_mask(segments, mask)  # (B, T, T)
        device = ids.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else self.encoder.dtype
        additive = torch.zeros(allowed.shape, dtype=dtype, device=ids.device)
        additive = additive.masked_fill(~allowed, torch.finfo(dtype).min)[:, None]  # (B, 1, T, T)
        hidden = self.hidden(ids, additive, token_type_ids=segments.clamp(max=self._type_vocab() - 1))
        labels = batch["s2s_labels"]
        where = labels != -100
        return self._lm_head()(hidden[where]), labels[where]

    def _type_vocab(self) -> int:
        return int(getattr(self.encoder.config, "type_vocab_size", 1) or 1)

    def _lm_head(self) -> nn.Module:
        for name in ("cls", "lm_head"):
            if hasattr(self.mlm, name):
                return getattr(self.mlm, name)
        raise ValueError(f"{type(self.mlm).__name__} has no LM head the s2s task can use")

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


class FrozenStart:
    """The start encoder (`init_from`'s weights), frozen, in eval mode, kept off the module tree: not trained,
    not in checkpoints, not wrapped by DDP. Moves to the batch's device on first use."""

    def __init__(self, model: TfcsgModel):
        from transformers import AutoModel

        with _quiet_transformers():
            self.encoder = AutoModel.from_pretrained(model.init_from).eval().requires_grad_(False)
        self.pooling = model.pooling
        own = dict(self.encoder.named_parameters())
        # The trained encoder's parameters that the start has (a pooler or a new head has no start value).
        self.names = [n for n, p in model.encoder.named_parameters() if n in own and own[n].shape == p.shape]
        if not self.names:
            raise ValueError(f"{model.init_from}: no parameter of the start encoder matches the model's")

    def params(self, device: torch.device) -> list[Tensor]:
        self.encoder.to(device)
        own = dict(self.encoder.named_parameters())
        return [own[n] for n in self.names]

    @torch.no_grad()
    def sentence(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        self.encoder.to(input_ids.device)
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return pool(hidden, attention_mask, self.pooling)


class TfcsgLoss(nn.Module):
    """The sum of the chosen losses with their weights; `parts` has each loss and the in-batch accuracy."""

    def __init__(
        self,
        model: TfcsgModel,
        losses: str = "kw+s2s",
        temperature: float = 0.05,
        negatives: str = "topic-masked",
        kl_weight: float = 1.0,
        kl_detach_target: bool = True,
        s2s_weight: float = 1.0,
        kw_weight: float = 1.0,
        cl_weight: float = 1.0,
        sim_anchor_weight: float = 0.0,
        l2sp_weight: float = 0.0,
        teacher=None,
        teach_weight: float = 1.0,
        teacher_temperature: float = 0.0,
    ):
        super().__init__()
        if negatives not in NEGATIVES:
            raise ValueError(f"negatives must be one of {NEGATIVES}, got {negatives!r}")
        self.model = model
        self.losses = parse_losses(losses)
        self.temperature = temperature
        self.negatives = negatives
        self.weights = {
            "cl": cl_weight,
            "kl": kl_weight,
            "s2s": s2s_weight,
            "kw": kw_weight,
            "anchor": sim_anchor_weight,
            "l2sp": l2sp_weight,
            "teach": teach_weight,
        }
        self.kl_detach_target = kl_detach_target
        # a frozen Teacher (models/training/teacher.py), off the module tree: its scores of each query against the
        # batch's passages are the `teach` part's target (temperature 0: the run's own)
        self.teacher = teacher
        self.teacher_temperature = teacher_temperature or temperature
        self.start = FrozenStart(model) if sim_anchor_weight or l2sp_weight else None

    def forward(self, batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        m = self.model
        ids, mask = batch["input_ids"], batch["attention_mask"]
        mask_negatives = (
            topic_negative_mask(batch["topics"], batch["text_ids"]) if self.negatives == "topic-masked" else None
        )
        parts: dict[str, Tensor] = {}
        if "cl" in self.losses:  # two dropout views of every question in one pass
            h_q, h_q2 = m.sentence(torch.cat([ids, ids]), torch.cat([mask, mask])).chunk(2)
            parts["cl"] = contrastive_loss(h_q, h_q2, self.temperature, mask_negatives)
        else:
            h_q = m.sentence(ids, mask)
        if "kl" in self.losses or "kw" in self.losses:
            h_t = m.sentence(batch["kw_input_ids"], batch["kw_attention_mask"])
            if "kw" in self.losses:
                parts["kw"] = contrastive_loss(h_q, h_t, self.temperature, mask_negatives)
            if "kl" in self.losses:
                target = h_t.detach() if self.kl_detach_target else h_t
                parts["kl"] = kl_loss(target, m.reconstruct(h_q))
            if self.teacher is not None and "teacher_input_ids" in batch:
                parts["teach"] = self.teach(batch, h_q, h_t, mask_negatives)
        if "s2s" in self.losses:
            logits, labels = m.s2s_logits(batch)
            parts["s2s"] = s2s_loss(logits, labels)
        if self.weights["anchor"]:
            parts["anchor"] = similarity_anchor_loss(h_q, self.start.sentence(ids, mask))
        if self.weights["l2sp"]:
            names = dict(m.encoder.named_parameters())
            parts["l2sp"] = weight_anchor_loss([names[n] for n in self.start.names], self.start.params(ids.device))
        loss = sum(self.weights[k] * v for k, v in parts.items())
        positives = h_t if "kw" in self.losses else (h_q2 if "cl" in self.losses else h_q)
        a = nn.functional.normalize(h_q.detach().float(), dim=-1)
        b = nn.functional.normalize(positives.detach().float(), dim=-1)
        parts["acc"] = torch.tensor(in_batch_accuracy(a, b))
        return loss, parts

    def teach(self, batch: dict[str, Tensor], h_q: Tensor, h_t: Tensor, mask_negatives: Tensor | None) -> Tensor:
        """The teacher's distribution over each query's in-batch candidates, kept (`distillation_loss`): the same
        candidates and the same masked rows as `kw`."""
        t_q = self.teacher.embed(batch["teacher_input_ids"], batch["teacher_attention_mask"])
        t_p = self.teacher.embed(batch["teacher_kw_input_ids"], batch["teacher_kw_attention_mask"])
        return distillation_loss(h_q, h_t, t_q, t_p, self.temperature, self.teacher_temperature, mask_negatives)
