"""The GUR model: a T5 encoder-decoder plus a non-linear projection head on the encoder output.

The sentence vector is pool(encoder states) -> Linear(d, d) -> GELU -> Linear(d, vector_dim) -> L2
normalise (the reference code skips the normalisation; the paper says cosine). Pooling:
`cls` (the projection token at position 0, the paper), `mean` (over real tokens) or `eos`
(the last real token, the reference code). `head="none"` drops the projection (a warm start
keeps its pretrained vectors' geometry that way). `init_from` warm-starts from a local pretrained
BERT-style encoder folder as a bert2bert encoder-decoder (decoder and cross-attention from the
same weights, as in Rothe et al. 2020), since no pretrained T5 installs offline.

Throughput options of the T5 (models/gur/attention.py, models/gur/packing.py, models/gur/fused_head.py):
`attention` picks the kernel (`eager`: transformers' own forward, the default; `sdpa`, `flex`:
our forward over the same modules), a packed batch (with `segment_ids`) is encoded, decoded
and pooled per segment, and `fused_lm_head` computes the LM loss in chunks without full logits.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import (
    AutoConfig,
    EncoderDecoderConfig,
    EncoderDecoderModel,
    PreTrainedModel,
    T5Config,
    T5ForConditionalGeneration,
)
from transformers.modeling_outputs import BaseModelOutput

from models.gur import t5_forward
from models.gur.fused_head import linear_cross_entropy
from models.gur.packing import pool_segments, shift_right_in_segments
from models.training.throughput import check_attention

POOLINGS = ("cls", "mean", "eos")
HEADS = ("mlp", "none")


@dataclass
class GurModelConfig:
    vocab_size: int = 32000
    d_model: int = 512
    d_ff: int = 1024
    num_layers: int = 8
    num_decoder_layers: int = 8
    num_heads: int = 6
    d_kv: int = 64
    dropout: float = 0.1
    feed_forward_proj: str = "gated-gelu"  # T5 v1.1, like the paper's Randeng-T5 init
    vector_dim: int = 128
    # "mlp": Linear-GELU-Linear to vector_dim (the paper's head, for a model trained from scratch);
    # "none": the pooled state itself, so a warm start keeps the pretrained model's geometry
    # (a random head in front of MiniLM cost 4-10 points on every set; see the README).
    head: str = "mlp"
    pooling: str = "cls"
    init_from: str = ""  # a local pretrained encoder folder (bert2bert warm start); "" = T5 from scratch
    attention: str = "eager"  # eager | sdpa | flex (models.gur.attention); T5 only
    fused_lm_head: bool = False  # chunked LM head + cross-entropy (models.gur.fused_head); T5 only
    pad_id: int = 0
    eos_id: int = 1
    cls_id: int = 2


PRESETS: dict[str, dict] = {
    "tiny": dict(d_model=64, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4, d_kv=16, vector_dim=32),
    "small": dict(d_model=512, d_ff=1024, num_layers=8, num_decoder_layers=8, num_heads=6, d_kv=64, vector_dim=128),
}


def preset_config(name: str, **overrides) -> GurModelConfig:
    """`tiny` (CPU tests) or `small` (GUR-Small: 8+8 layers, d_model 512, vector 128), with overrides."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {sorted(PRESETS)}")
    return dataclasses.replace(GurModelConfig(**PRESETS[name]), **overrides)


def build_seq2seq(config: GurModelConfig, load_weights: bool = True) -> PreTrainedModel:
    """A T5ForConditionalGeneration from scratch, or a bert2bert EncoderDecoderModel from `init_from`."""
    if not config.init_from:
        t5 = T5Config(
            vocab_size=config.vocab_size,
            d_model=config.d_model,
            d_kv=config.d_kv,
            d_ff=config.d_ff,
            num_layers=config.num_layers,
            num_decoder_layers=config.num_decoder_layers,
            num_heads=config.num_heads,
            dropout_rate=config.dropout,
            feed_forward_proj=config.feed_forward_proj,
            pad_token_id=config.pad_id,
            eos_token_id=config.eos_id,
            decoder_start_token_id=config.pad_id,
            tie_word_embeddings=False,
        )
        model = T5ForConditionalGeneration(t5)
        # HF initialises an untied T5 head with std 1 (an initial loss far above log V); scale it like a tied head.
        nn.init.normal_(model.lm_head.weight, std=config.d_model**-0.5)
        return model
    if load_weights:
        model = EncoderDecoderModel.from_encoder_decoder_pretrained(config.init_from, config.init_from)
    else:
        enc = AutoConfig.from_pretrained(config.init_from)
        dec = AutoConfig.from_pretrained(config.init_from, is_decoder=True, add_cross_attention=True)
        model = EncoderDecoderModel(config=EncoderDecoderConfig.from_encoder_decoder_configs(enc, dec))
    model.encoder.resize_token_embeddings(config.vocab_size)
    model.decoder.resize_token_embeddings(config.vocab_size)
    for cfg in (model.config, model.generation_config):
        cfg.decoder_start_token_id = config.cls_id
        cfg.pad_token_id = config.pad_id
        cfg.eos_token_id = config.eos_id
    model.config.vocab_size = config.vocab_size
    return model


def hidden_size(seq2seq: PreTrainedModel) -> int:
    cfg = seq2seq.config
    return cfg.d_model if isinstance(cfg, T5Config) else cfg.encoder.hidden_size


def pool(hidden: Tensor, attention_mask: Tensor, mode: str) -> Tensor:
    """(B, T, C) encoder states -> (B, C); right padding assumed (as the collate writes it)."""
    if mode == "cls":
        return hidden[:, 0]
    if mode == "mean":
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
    if mode == "eos":
        last = attention_mask.sum(1).long() - 1  # (B,)
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    raise ValueError(f"unknown pooling {mode!r}; choose from {POOLINGS}")


class ProjectionHead(nn.Module):
    """Linear(d, d) -> GELU -> dropout -> Linear(d, vector_dim); the same chain as the export's two Dense modules."""

    def __init__(self, d_model: int, vector_dim: int, dropout: float = 0.1):
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)
        self.act = nn.GELU()
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(d_model, vector_dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.out(self.dropout(self.act(self.dense(x))))  # (B, vector_dim)


class GurModel(nn.Module):
    """Encoder-decoder + projection; one encoder pass serves both the LM and the contrastive loss."""

    def __init__(self, config: GurModelConfig, load_weights: bool = True):
        super().__init__()
        if config.pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {config.pooling!r}; choose from {POOLINGS}")
        if config.head not in HEADS:
            raise ValueError(f"unknown head {config.head!r}; choose from {HEADS}")
        check_attention(config.attention)
        if config.init_from and (config.attention != "eager" or config.fused_lm_head):
            raise ValueError("attention and fused_lm_head apply to the T5 model; a warm start (init_from) keeps eager")
        self.config = config
        self.seq2seq = build_seq2seq(config, load_weights)
        d = hidden_size(self.seq2seq)
        mlp = config.head == "mlp"
        self.projection = ProjectionHead(d, config.vector_dim, config.dropout) if mlp else nn.Identity()

    @property
    def vector_dim(self) -> int:
        return self.config.vector_dim if self.config.head == "mlp" else hidden_size(self.seq2seq)

    def own_forward(self, packed: dict[str, Tensor] | None) -> bool:
        """Our T5 forward (models.gur.t5_forward), not transformers': for packing, sdpa / flex, the fused head."""
        cfg = self.config
        return packed is not None or cfg.attention != "eager" or cfg.fused_lm_head

    def encode(self, input_ids: Tensor, attention_mask: Tensor, packed: dict[str, Tensor] | None = None) -> Tensor:
        """(B, T) -> (B, T, C); `packed`: the batch's `segment_ids`, `sentence_starts`, `sentence_ends`."""
        if not self.own_forward(packed):
            return self.seq2seq.get_encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        segments = packed["segment_ids"] if packed is not None else attention_mask
        return t5_forward.encode(self.seq2seq.encoder, input_ids, segments, self.config.attention)

    def embed_hidden(self, hidden: Tensor, attention_mask: Tensor, packed: dict[str, Tensor] | None = None) -> Tensor:
        if packed is None:
            pooled = pool(hidden, attention_mask, self.config.pooling)  # (B, C)
        else:
            starts, ends = packed["sentence_starts"], packed["sentence_ends"]
            pooled = pool_segments(hidden, packed["segment_ids"], starts, ends, self.config.pooling)  # (n, C)
        return F.normalize(self.projection(pooled).float(), dim=-1)  # (B or n, self.vector_dim)

    def lm_loss(
        self, hidden: Tensor, attention_mask: Tensor, labels: Tensor, packed: dict[str, Tensor] | None
    ) -> Tensor:
        """Span-infilling cross-entropy (mean over labelled tokens) given the encoder states."""
        if not self.own_forward(packed):
            out = self.seq2seq(
                encoder_outputs=BaseModelOutput(last_hidden_state=hidden), attention_mask=attention_mask, labels=labels
            )
            return out.loss
        t5 = self.seq2seq
        if packed is not None:
            segments, memory_segments = packed["decoder_segment_ids"], packed["segment_ids"]
        else:
            segments, memory_segments = torch.ones_like(labels), attention_mask
        decoder_ids = shift_right_in_segments(
            labels, segments, t5.config.decoder_start_token_id, t5.config.pad_token_id
        )
        states = t5_forward.decode(t5.decoder, decoder_ids, segments, hidden, memory_segments, self.config.attention)
        if t5.config.scale_decoder_outputs:
            states = states * (t5.model_dim**-0.5)
        if self.config.fused_lm_head:
            return linear_cross_entropy(states, t5.lm_head.weight, labels)
        logits = t5.lm_head(states)  # (B, L, V)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        labels: Tensor | None = None,
        embed: bool = True,
        packed: dict[str, Tensor] | None = None,
    ) -> dict[str, Tensor]:
        """input_ids, attention_mask (B, T); labels (B, L) with -100 at padding. Returns embeddings and/or lm_loss.

        `packed` (a packed batch's segment tensors, models.gur.packing): the rows hold several sentences;
        the embeddings are then one per sentence, in sentence order."""
        hidden = self.encode(input_ids, attention_mask, packed)  # (B, T, C)
        out: dict[str, Tensor] = {}
        if embed:
            out["embeddings"] = self.embed_hidden(hidden, attention_mask, packed)
        if labels is not None:
            out["lm_loss"] = self.lm_loss(hidden, attention_mask, labels, packed)
        return out

    @torch.no_grad()
    def embed(self, input_ids: Tensor, attention_mask: Tensor, packed: dict[str, Tensor] | None = None) -> Tensor:
        return self.embed_hidden(self.encode(input_ids, attention_mask, packed), attention_mask, packed)

    def num_params(self, non_embedding: bool = False) -> int:
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= sum(p.numel() for m in self.modules() if isinstance(m, nn.Embedding) for p in m.parameters())
        return n
