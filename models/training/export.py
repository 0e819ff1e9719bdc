"""Export a fine-tuned pretrained encoder (TFCSG, SimCSE, documents) as a sentence-transformers folder; the GUR
T5's own export, with its head and generator, is models/gur/export.py."""

from __future__ import annotations

import json
from pathlib import Path

from storage.atomic import atomic_path

ST_POOLING = {"cls": "cls", "mean": "mean", "eos": "lasttoken"}


def export_encoder(encoder, tokenizer, out: str | Path, pooling: str = "mean", max_seq_length: int = 256) -> Path:
    """A fine-tuned encoder (TFCSG, SimCSE) as a sentence-transformers folder: transformer -> pooling -> normalize.

    The same layout as all-MiniLM-L6-v2's own folder, so `SentenceTransformer(path)` and
    `AutoModel.from_pretrained(path)` + pooling both load it; written beside `out`, then renamed.
    """
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    out = Path(out)
    with atomic_path(out) as tmp:
        encoder.eval().save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        modules = [
            Transformer(str(tmp), max_seq_length=max_seq_length),
            Pooling(encoder.config.hidden_size, pooling_mode=ST_POOLING[pooling]),
            Normalize(),
        ]
        SentenceTransformer(modules=modules, device="cpu").save(str(tmp))
        info = {
            "pooling": pooling,
            "st_pooling": ST_POOLING[pooling],
            "head": "none",
            "vector_dim": encoder.config.hidden_size,
            "encoder": "AutoModel(path)",
        }
        (tmp / "gur_export.json").write_text(json.dumps(info, indent=2) + "\n")
    return out
