"""Document vectors: one documents shard in, one `embeddings` shard out, with a sentence-transformers model.

    texts = document_texts(titles, texts)           # "title\\ntext", or the text alone
    vectors = encode_texts(model, texts, 32)        # (n, dim) float32, L2-normalised rows
    embed_shard(documents_shard, out_dir, i, config) # part-0000i.parquet: doc_id, embedding, model

Precision: `float32`, or `bfloat16` weights and activations (the pooled vector cast back to float32 before
it is normalised). On a CPU with native bfloat16 (AVX512-BF16 or AMX) or a GPU that has it, bfloat16 embeds
more documents per CPU second than float32 with nearly all the top-10 results of sample queries the same
(benchmarks/embed_speed.py; the results log: docs/results/, the embed stage in bfloat16, at batch 32 and
in worker processes); `auto` picks it there and float32 elsewhere, where bfloat16 is emulated
and slower. The precision is in the output's fingerprint; the thread count is not: a shard's
vectors are the same bytes on one thread or many (tested).

Truncation is the model's own: its tokenizer keeps the first `max_seq_length` word pieces ([CLS] and
[SEP] included; 256 for MiniLM), so the title, which comes first, always counts and a long text
counts by its beginning. Batches are the shard's texts sorted by token count (longest first, ties
in shard order), so a shard's vectors depend only on its bytes and the model: an incremental run
and a cold one write the same bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from models.encoders import l2_normalise
from storage.shards import write_shard, write_shard_stats

EMBED_CODE_VERSION = "embed_v1"
UNITS = ("documents", "sentences")
PRECISIONS = ("auto", "float32", "bfloat16")
# Texts per forward pass: 32 embeds more documents per CPU second than 64 with MiniLM on a CPU (the activations
# of a smaller batch stay in cache; benchmarks/embed_speed.py; docs/results/, the embed stage in bfloat16, at
# batch 32 and in worker processes).
EMBED_BATCH = 32
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo flags of a CPU that computes bfloat16 natively
REPORT_EVERY = 256  # texts between progress reports from inside a shard


@dataclass(frozen=True)
class EmbedConfig:
    """What decides an `embeddings` output besides its input: the model's fingerprint (its weights' bytes,
    never its path) and how texts are batched. `model_path` is where to load it from, not part of the key."""

    model: str  # the model's fingerprint (tasks.evaluate.models.model_fingerprint)
    model_path: str = field(default="", compare=False)
    unit: str = field(default="documents", metadata={"help": "what to embed: documents (title + text) or sentences"})
    batch_size: int = field(default=EMBED_BATCH, metadata={"help": "texts per forward pass"})
    precision: str = field(
        default="float32",
        metadata={"help": "float32 or bfloat16 (auto, resolved before a run: bfloat16 where the hardware has it)"},
    )
    threads: int = field(default=0, compare=False)  # torch threads in the process embedding a shard (0: torch's)

    def __post_init__(self) -> None:
        if self.precision not in ("float32", "bfloat16"):  # `auto` is resolved before a config is made
            raise ValueError(f"embed precision {self.precision!r}: float32 or bfloat16")

    def key(self) -> dict[str, object]:
        """The fingerprinted part: everything but where the model lies and how many threads run it (float32
        outputs have the key they had before precision was a choice)."""
        key: dict[str, object] = {"model": self.model, "unit": self.unit, "batch_size": self.batch_size}
        if self.precision != "float32":
            key["precision"] = self.precision
        return key


def native_bf16(cpuinfo: str | None = None) -> bool:
    """Whether this machine computes bfloat16 natively: a CUDA device that supports it, else a CPU flag."""
    import torch

    if torch.cuda.is_available():
        return bool(torch.cuda.is_bf16_supported())
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:  # not Linux: float32, the safe choice
            return False
    flags = next((line for line in cpuinfo.splitlines() if line.startswith("flags")), "").split()
    return any(flag in flags for flag in BF16_CPU_FLAGS)


def resolve_precision(value: str, native: bool | None = None) -> str:
    """`auto` -> bfloat16 where the hardware has it, else float32; float32 / bfloat16 as given."""
    if value not in PRECISIONS:
        raise ValueError(f"precision {value!r}: give one of {', '.join(PRECISIONS)}")
    if value != "auto":
        return value
    return "bfloat16" if (native_bf16() if native is None else native) else "float32"


def document_texts(titles: list[str | None], texts: list[str]) -> list[str]:
    """A document's text as the model reads it: the title, a line break, the text (no title: the text)."""
    return [f"{title}\n{text}" if title else text for title, text in zip(titles, texts, strict=True)]


def embeddings_schema(dim: int, unit: str = "documents") -> pa.Schema:
    """`doc_id`, (`sent_id` for sentences), `embedding` as FLOAT[dim] (a fixed-size list), `model`."""
    key = [("doc_id", pa.string())] + ([("sent_id", pa.int32())] if unit == "sentences" else [])
    return pa.schema([*key, ("embedding", pa.list_(pa.float32(), dim)), ("model", pa.string())])


@functools.lru_cache(maxsize=2)
def load_encoder(path: str, precision: str = "float32"):
    """The SentenceTransformer at `path`, loaded once per process (a stage calls it once per shard), its weights
    in `precision` (float32 or bfloat16)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    if precision not in ("float32", "bfloat16"):
        raise ValueError(f"precision {precision!r}: float32 or bfloat16")
    hf_logging.disable_progress_bar()  # "Loading weights" bars would break `gur search`'s table
    model = SentenceTransformer(path, local_files_only=True, device="cpu" if not _cuda() else None)
    if precision == "bfloat16":
        model = model.to(torch.bfloat16)
    model.eval()
    return model


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def embedding_dim(model) -> int:
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter())


def token_lengths(model, texts: list[str]) -> list[int]:
    """Word pieces per text after the model's truncation (what a batch pads to)."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        return [len(t) for t in texts]
    limit = model.max_seq_length
    return list(tokenizer(texts, truncation=True, max_length=limit, return_length=True)["length"])


def encode_texts(model, texts: list[str], batch_size: int, report: Callable[[int], None] | None = None) -> np.ndarray:
    """(len(texts), dim) float32 with L2-normalised rows, batches by token count (see the module docstring).

    The same forward pass as `SentenceTransformer.encode` (`preprocess`, the modules, the pooled
    `sentence_embedding`) without its per-call overhead, sorted by token count rather than characters.
    """
    import torch

    dim = embedding_dim(model)
    out = np.zeros((len(texts), dim), np.float32)
    if not texts:
        return out
    lengths = token_lengths(model, texts)
    order = sorted(range(len(texts)), key=lambda i: (-lengths[i], i))
    since = 0
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            features = model.preprocess([texts[i] for i in rows])
            features = {k: v.to(model.device) if hasattr(v, "to") else v for k, v in features.items()}
            vectors = model(features)["sentence_embedding"].float().cpu().numpy()
            out[rows] = vectors
            since += len(rows)
            if report and since >= REPORT_EVERY:
                report(since)
                since = 0
    if report and since:
        report(since)
    return l2_normalise(out)


def shard_texts(table: pa.Table, unit: str) -> list[str]:
    if unit == "sentences":
        return table.column("text").to_pylist()
    return document_texts(table.column("title").to_pylist(), table.column("text").to_pylist())


def vectors_table(table: pa.Table, vectors: np.ndarray, model_fp: str, unit: str) -> pa.Table:
    """The output rows, in the input's row order."""
    n, dim = vectors.shape
    values = pa.array(np.ascontiguousarray(vectors, np.float32).reshape(-1), pa.float32())
    columns = {"doc_id": table.column("doc_id")}
    if unit == "sentences":
        columns["sent_id"] = table.column("sent_id").cast(pa.int32())
    columns["embedding"] = pa.FixedSizeListArray.from_arrays(values, dim)
    columns["model"] = pa.array([model_fp] * n, pa.string())
    return pa.Table.from_pydict(columns, schema=embeddings_schema(dim, unit))


def embed_shard(
    in_path: str, out_dir: str, index: int, config: EmbedConfig, report: Callable[[int], None] | None = None
) -> dict[str, int]:
    """The stage's per-shard worker: shard `index` of `documents` (or `sentences`) -> shard `index` of vectors."""
    columns = ["doc_id", "sent_id", "text"] if config.unit == "sentences" else ["doc_id", "title", "text"]
    table = pq.read_table(in_path, columns=columns)
    if config.threads:  # one of several worker processes: its share of the cores
        import torch

        torch.set_num_threads(config.threads)
    model = load_encoder(config.model_path, config.precision)
    vectors = encode_texts(model, shard_texts(table, config.unit), config.batch_size, report)
    stats = {config.unit: table.num_rows, "embeddings": table.num_rows}
    zero = int((~np.any(vectors != 0, axis=1)).sum())
    if zero:
        stats["zero_vector"] = zero  # a text with nothing the model reads: cosine 0 with everything
    out = Path(out_dir)
    write_shard_stats(out, index, stats)
    write_shard(out, index, vectors_table(table, vectors, config.model, config.unit), dictionary=["model"])
    return stats
