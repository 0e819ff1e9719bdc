"""A tiny random BERT model folder and real StackOverflow titles, for the TFCSG / SimCSE tests."""

from __future__ import annotations

import csv
import itertools
import re
from collections import Counter
from pathlib import Path

import torch

from storage.shared_data import shared_data

REPO = Path(__file__).resolve().parents[1]
STACKOVERFLOW = shared_data("stackoverflow", "train.tsv")


def titles(n: int) -> list[dict]:
    with open(STACKOVERFLOW, encoding="utf-8", newline="") as f:
        return list(itertools.islice(csv.DictReader(f, delimiter="\t"), n))


def write_titles(folder: Path, rows: list[dict]) -> tuple[Path, Path]:
    """`questions.tsv` (id, title: what training sees) and `labelled.tsv` (with the tag: what evaluation scores)."""
    questions, labelled = folder / "questions.tsv", folder / "labelled.tsv"
    with open(questions, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, delimiter="\t").writerows([["id", "title"], *([r["id"], r["title"]] for r in rows)])
    with open(labelled, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, delimiter="\t").writerows(
            [["id", "title", "tag"], *([r["id"], r["title"], r["tag"]] for r in rows)]
        )
    return questions, labelled


def tiny_bert(folder: Path, texts: list[str]) -> Path:
    """A random 2-layer BERT with a word + character vocabulary of the texts (BERT's tokenizer)."""
    from transformers import BertConfig, BertModel, BertTokenizer

    words = Counter(w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower()))
    chars = sorted({c for w in words for c in w})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *(f"##{c}" for c in chars)]
    vocab += [w for w, _ in words.most_common(400) if w not in vocab]
    folder.mkdir(parents=True)
    tok = BertTokenizer(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)
    tok.save_pretrained(str(folder))
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(str(folder))
    return folder
