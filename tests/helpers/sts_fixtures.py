"""Real STS-B pairs and tiny random models (BERT, Llama) for the supervised STS tests."""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import torch

from samples.tiny_bert import tiny_bert
from storage.shared_data import shared_data

REPO = Path(__file__).resolve().parents[2]
STSB = shared_data("stsb")


def stsb_rows(lang: str, split: str, n: int, skip: int = 0) -> list[list[str]]:
    with open(STSB / f"stsb-{lang}-{split}.csv", encoding="utf-8", newline="") as f:
        return list(itertools.islice(csv.reader(f), skip, skip + n))


def write_csv(path: Path, rows: list[list[str]]) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(rows)
    return path


def tiny_llama(folder: Path, texts: list[str]) -> Path:
    """A random 2-layer Llama with the tiny BERT's word-piece tokenizer (AutoTokenizer loads it)."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaModel

    tiny_bert(folder, texts)  # writes the tokenizer (and a BERT we replace)
    for name in ("model.safetensors", "config.json"):
        (folder / name).unlink()
    vocab = len(AutoTokenizer.from_pretrained(str(folder)))
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=128,
    )  # fmt: skip
    torch.manual_seed(0)
    LlamaModel(config).save_pretrained(str(folder))
    return folder


def _byte_symbols() -> list[str]:
    """GPT-2's byte -> printable character table (what a `gpt2` GGUF tokenizer's tokens are made of)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return [out[b] for b in range(256)]


def tiny_gguf(path: Path, seed: int = 0) -> Path:
    """A random 2-layer Llama written with the gguf package's writer: F32 tensors, a byte-level BPE
    tokenizer (256 byte tokens, 2 merges, <|endoftext|>): what transformers' GGUF loader reads."""
    import gguf
    import numpy as np

    rng = np.random.default_rng(seed)
    hidden, ffn, layers, heads = 32, 64, 2, 2
    tokens = ["<|endoftext|>", *_byte_symbols(), "Ġt", "Ġth"]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(128)
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types([3] + [1] * (len(tokens) - 1))
    writer.add_token_merges(["Ġ t", "Ġt h"])
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(0)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(0)

    def tensor(name: str, *shape: int) -> None:
        writer.add_tensor(name, rng.standard_normal(shape).astype(np.float32) * 0.02)

    tensor("token_embd.weight", len(tokens), hidden)
    for i in range(layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(hidden, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensor(f"blk.{i}.{name}.weight", hidden, hidden)
        tensor(f"blk.{i}.ffn_gate.weight", ffn, hidden)
        tensor(f"blk.{i}.ffn_up.weight", ffn, hidden)
        tensor(f"blk.{i}.ffn_down.weight", hidden, ffn)
    writer.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
