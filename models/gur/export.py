"""Export a trained GUR model as a sentence-transformers folder that plain transformers also loads.

Layout (`export/`):
    config.json, model.safetensors, tokenizer files   the full T5 encoder-decoder (bert2bert: the encoder)
    modules.json, 1_Pooling/, 2_Dense/, 3_Dense/, 4_Normalize/   the sentence-transformers chain:
        transformer -> pooling -> Dense(d, d, GELU) -> Dense(d, vector_dim) -> normalize
        (no Dense folders for a model trained with `head="none"`, e.g. a warm start)
    generator/                                        bert2bert only: the encoder-decoder for generation
    gur_export.json                                   pooling, vector size, and how to embed without ST

`SentenceTransformer(path)` loads the encoder (T5EncoderModel for a T5) and the head;
`AutoModel.from_pretrained(path)` gives the same weights (a T5Model: use its `.encoder`), and
`automodel_embed` rebuilds the embedding from it and the Dense folders' weights;
`AutoModelForSeq2SeqLM.from_pretrained(path)` (or `path/generator`) generates span infills.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn

from models.gur.model import GurModel, hidden_size
from models.gur.tokenizer import GurTokenizer
from models.training.export import ST_POOLING
from storage.atomic import atomic_path


def export_model(model: GurModel, tok: GurTokenizer, out: str | Path, max_seq_length: int = 128) -> Path:
    """Write the export folder atomically (built beside `out`, then renamed into place)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer

    out = Path(out)
    with atomic_path(out) as tmp:
        model = model.eval()
        seq2seq = model.seq2seq
        is_t5 = hasattr(seq2seq, "lm_head") and seq2seq.config.model_type == "t5"
        encoder_folder = seq2seq if is_t5 else seq2seq.encoder
        encoder_folder.save_pretrained(str(tmp))
        tok.save(tmp)
        d = hidden_size(seq2seq)
        head = model.projection
        modules = [
            Transformer(str(tmp), max_seq_length=max_seq_length),
            Pooling(d, pooling_mode=ST_POOLING[model.config.pooling]),
        ]
        if model.config.head == "mlp":
            modules += [
                Dense(
                    d,
                    d,
                    activation_function=nn.GELU(),
                    init_weight=head.dense.weight.detach().cpu().clone(),
                    init_bias=head.dense.bias.detach().cpu().clone(),
                ),
                Dense(
                    d,
                    head.out.out_features,
                    activation_function=nn.Identity(),
                    init_weight=head.out.weight.detach().cpu().clone(),
                    init_bias=head.out.bias.detach().cpu().clone(),
                ),
            ]
        modules.append(Normalize())
        SentenceTransformer(modules=modules, device="cpu").save(str(tmp))
        encoder_folder.save_pretrained(str(tmp))  # the full encoder-decoder again (ST saved the encoder only)
        if not is_t5:
            seq2seq.save_pretrained(str(tmp / "generator"))
            tok.save(tmp / "generator")
        info = {
            "pooling": model.config.pooling,
            "st_pooling": ST_POOLING[model.config.pooling],
            "head": model.config.head,
            "vector_dim": model.vector_dim,
            "generator": "." if is_t5 else "generator",
            "encoder": "AutoModel(path).encoder" if is_t5 else "AutoModel(path)",
        }
        (tmp / "gur_export.json").write_text(json.dumps(info, indent=2) + "\n")
    return out


def _dense_layers(path: Path) -> list[nn.Linear]:
    layers = []
    for module in json.loads((path / "modules.json").read_text()):
        if module["type"].endswith("Dense"):
            weights = load_file(str(path / module["path"] / "model.safetensors"))
            w = weights["linear.weight"]
            linear = nn.Linear(w.shape[1], w.shape[0])
            linear.load_state_dict({"weight": w, "bias": weights["linear.bias"]})
            layers.append(linear)
    return layers


@torch.no_grad()
def automodel_embed(path: str | Path, texts: list[str], max_length: int = 128) -> torch.Tensor:
    """Embeddings from `AutoModel.from_pretrained(path)` and the Dense folders, without sentence-transformers."""
    from transformers import AutoModel, AutoTokenizer

    path = Path(path)
    info = json.loads((path / "gur_export.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModel.from_pretrained(str(path)).eval()
    encoder = model.encoder if info["encoder"].endswith(".encoder") else model
    batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    hidden = encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    from models.gur.model import pool

    x = pool(hidden, batch["attention_mask"], info["pooling"])  # (B, C)
    layers = _dense_layers(path)
    if layers:  # the MLP head; a warm start's export has none
        first, second = layers
        x = second(F.gelu(first(x)))
    return F.normalize(x, dim=-1)  # (B, vector_dim)
