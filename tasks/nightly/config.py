"""`nightly.toml`: what one nightly-retrain run does. Read once per run; every error names the file and key.

    [corpus]                     # the folder (or file) new documents land in
    path = "/data/support-questions"
    format = "auto"              # as `gur build-pairs --format`
    text_field = "text"
    title_field = "title"
    id_field = "id"

    [train]
    method = "tfcsg"             # tfcsg (warm-starts from the champion) or gur
    init_from = ""               # the first night's encoder ("" = the shipped MiniLM)
    preset = "auto"              # tfcsg: paper / cpu / auto; gur: tiny / small
    steps = 0                    # 0: the preset's length
    options = {}                 # any TrainConfig field, e.g. {lr = 3e-5}

    [keywords]                   # tfcsg: GSDMM on the corpus
    k = 30

    [evaluate]                   # the frozen suite both models are scored on (without the section:
                                 # ../shared/data StackOverflow titles and STS-B en dev)
    stackoverflow = ""           # question TSV with tags ("" = none)
    stsb = []                    # STS-B CSVs
    beir = []                    # BEIR folders
    question_queries = 0

    [gate]
    primary = "stackoverflow-train/question_retrieval/precision@1"
    margin = 0.0                 # the candidate must beat the champion by at least this
    guards = {"stsb-en-dev/sts/spearman" = 0.01}   # metric -> allowed drop

Metric names are `dataset/task/metric[@k]` as in the `metrics` view (`gur sql "SELECT DISTINCT
dataset, task, metric, k FROM metrics"`).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from tasks.ingest.readers import ReaderConfig
from tasks.keywords.filter import KeywordsConfig

CONFIG_NAME = "nightly.toml"
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
DEFAULT_STACKOVERFLOW = SHARED_DATA / "stackoverflow" / "train.tsv"
DEFAULT_STSB = SHARED_DATA / "stsb" / "stsb-en-dev.csv"
SECTIONS = ("corpus", "train", "keywords", "evaluate", "gate")


@dataclass(frozen=True)
class CorpusConfig:
    path: str
    format: str = ReaderConfig.format
    text_field: str = ReaderConfig.text_field
    title_field: str = ReaderConfig.title_field
    id_field: str = ReaderConfig.id_field


@dataclass(frozen=True)
class TrainSection:
    method: str = "tfcsg"
    init_from: str = ""
    preset: str = "auto"
    steps: int = 0
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class KeywordsSection:
    k: int = KeywordsConfig.k
    unit: str = "documents"


@dataclass(frozen=True)
class EvaluateSection:
    stackoverflow: str = ""
    stsb: list[str] = field(default_factory=list)
    beir: list[str] = field(default_factory=list)
    question_queries: int = 0


@dataclass(frozen=True)
class GateSection:
    primary: str = "stackoverflow-train/question_retrieval/precision@1"
    margin: float = 0.0
    guards: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class NightlyConfig:
    source: str  # the file it was read from
    corpus: CorpusConfig
    train: TrainSection
    keywords: KeywordsSection
    evaluate: EvaluateSection
    gate: GateSection


def _section(cls, data: dict, name: str, source: Path):
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{source}: [{name}] has unknown keys {unknown}; known: {sorted(known)}")
    try:
        return cls(**data)
    except TypeError as exc:  # a required key is missing
        raise ValueError(f"{source}: [{name}]: {exc}") from None


def _absolute(path: str, base: Path) -> str:
    """Paths in the file are relative to the file's folder."""
    return str((base / path).resolve()) if path else ""


def load_nightly_config(path: str | Path) -> NightlyConfig:
    source = Path(path).resolve()
    if not source.exists():
        raise FileNotFoundError(f"{source}: no nightly config (see `gur nightly --help` for an example)")
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{source}: {exc}") from None
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise ValueError(f"{source}: unknown sections {unknown}; known: {list(SECTIONS)}")
    if "corpus" not in data or "path" not in data["corpus"]:
        raise ValueError(f"{source}: [corpus] path is required (the folder new documents land in)")
    base = source.parent
    corpus = _section(CorpusConfig, data["corpus"], "corpus", source)
    corpus = CorpusConfig(**{**corpus.__dict__, "path": _absolute(corpus.path, base)})
    train = _section(TrainSection, data.get("train", {}), "train", source)
    if train.method not in ("tfcsg", "gur"):
        raise ValueError(f"{source}: [train] method must be 'tfcsg' or 'gur', not {train.method!r}")
    train = TrainSection(**{**train.__dict__, "init_from": _absolute(train.init_from, base)})
    if "evaluate" in data:
        evaluate = _section(EvaluateSection, data["evaluate"], "evaluate", source)
        evaluate = EvaluateSection(
            stackoverflow=_absolute(evaluate.stackoverflow, base),
            stsb=[_absolute(p, base) for p in evaluate.stsb],
            beir=[_absolute(p, base) for p in evaluate.beir],
            question_queries=evaluate.question_queries,
        )
    else:  # the default suite: the StackOverflow titles and STS-B en dev beside the repository
        evaluate = EvaluateSection(stackoverflow=str(DEFAULT_STACKOVERFLOW), stsb=[str(DEFAULT_STSB)])
    if not (evaluate.stackoverflow or evaluate.stsb or evaluate.beir):
        raise ValueError(f"{source}: [evaluate] names no set (stackoverflow, stsb or beir)")
    gate = _section(GateSection, data.get("gate", {}), "gate", source)
    return NightlyConfig(
        source=str(source),
        corpus=corpus,
        train=train,
        keywords=_section(KeywordsSection, data.get("keywords", {}), "keywords", source),
        evaluate=evaluate,
        gate=gate,
    )
