"""One evaluation unit = one model on one dataset: which tasks run, their rows, and "not run".

A dataset spec names a kind, which fixes its tasks (StackOverflow: question retrieval and
zero-shot, from one encoding of the titles; STS-B and Lee-50: STS; BEIR folders and the demo
set: retrieval). Pure: the Prefect task in `tasks/evaluate/task.py` wraps `run_unit`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from models.encoders import BM25Ranker
from storage.layout import record_path
from tasks.evaluate.data import (
    DatasetMissing,
    DemoRetrievalConfig,
    build_demo_retrieval,
    lee_dir,
    load_beir,
    load_lee,
    load_stackoverflow,
    load_stsb,
)
from tasks.evaluate.models import model_fingerprint, model_label, resolve_model
from tasks.evaluate.scoring import (
    MetricValue,
    QuestionRetrievalConfig,
    RetrievalConfig,
    ZeroShotConfig,
    dense_retrieval,
    question_retrieval,
    sts,
    zero_shot,
)

KINDS = ("stackoverflow", "stsb", "lee", "beir", "demo")
SIMILARITY_KINDS = ("stsb", "lee")  # scored as pair / document similarity: no ranker, a nightly guard
# (task, metric, k) each kind reports; a unit that cannot run reports these with status not_run.
EXPECTED: dict[str, list[tuple[str, str, int | None]]] = {
    "stackoverflow": [
        ("question_retrieval", "precision", 1),
        ("question_retrieval", "precision", 5),
        ("question_retrieval", "precision", 10),
        ("question_retrieval", "map", None),
        ("question_retrieval", "mrr", None),
        ("zero_shot", "accuracy", None),
        ("zero_shot", "macro_f1", None),
    ],
    "stsb": [("sts", "pearson", None), ("sts", "spearman", None)],
    "lee": [("sts", "pearson", None), ("sts", "spearman", None)],
    "beir": [("retrieval", "recall", 100), ("retrieval", "mrr", 10)],
    "demo": [("retrieval", "recall", 100), ("retrieval", "mrr", 10)],
}


@dataclass(frozen=True)
class DatasetSpec:
    """What to evaluate on. `path` is empty for built-ins (Lee-50 and the demo set ship in gensim);
    `limit` keeps the first rows of a file (0: all), for smoke tests."""

    kind: str
    path: str = ""
    name: str = ""
    limit: int = field(default=0, metadata={"help": "keep the first N rows of each file (smoke test; 0: all)"})

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown dataset kind {self.kind!r}; one of {', '.join(KINDS)}")

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.kind == "lee":
            return "lee-50"
        if self.kind == "demo":
            return "demo-wiki-heldout"
        stem = Path(self.path).name.removesuffix(".tsv").removesuffix(".csv")
        return f"stackoverflow-{stem}" if self.kind == "stackoverflow" else stem


@dataclass(frozen=True)
class SuiteConfig:
    """Every task's settings; a unit's cache key only includes the part its kind uses."""

    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    question: QuestionRetrievalConfig = field(default_factory=QuestionRetrievalConfig)
    zero_shot: ZeroShotConfig = field(default_factory=ZeroShotConfig)
    demo: DemoRetrievalConfig = field(default_factory=DemoRetrievalConfig)
    beir_split: str = field(default="test", metadata={"help": "qrels split for BEIR folders"})
    batch_size: int = field(default=64, metadata={"help": "encoding batch size"})

    def for_kind(self, kind: str) -> dict[str, Any]:
        return {
            "stackoverflow": {"question": self.question, "zero_shot": self.zero_shot},
            "stsb": {"batch_size": self.batch_size},
            "lee": {"batch_size": self.batch_size},
            "beir": {"retrieval": self.retrieval, "split": self.beir_split},
            "demo": {"retrieval": self.retrieval, "demo": self.demo},
        }[kind]


def applicable(model: str, kind: str) -> bool:
    """BM25 ranks; it has no vectors to compare in STS."""
    return not (model.strip() == "bm25" and kind in SIMILARITY_KINDS)


def dataset_files(spec: DatasetSpec) -> list[Path]:
    """The files a dataset reads (their signature joins the cache key)."""
    if spec.kind == "lee":
        folder = Path(spec.path) if spec.path else lee_dir()
        return [folder / "lee.cor", folder / "similarities0-1.txt"]
    if spec.kind == "demo":
        from tasks.ingest.readers import default_corpus

        return [Path(spec.path) if spec.path else default_corpus()]
    return [Path(spec.path)]


def dataset_signature(spec: DatasetSpec) -> list[Any]:
    """`content_signature` of each file, or "missing" (a file that appears later changes the key)."""
    from storage.fingerprint import content_signature

    return [content_signature(p) if p.exists() else [str(p), "missing"] for p in dataset_files(spec)]


def recorded_spec(root: Path, spec: DatasetSpec) -> DatasetSpec:
    """`spec` as a record of the root names it: a held-out split's files relative to the root."""
    return replace(spec, path=record_path(root, spec.path))


def unit_identity(model: str, spec: DatasetSpec, config: SuiteConfig, root: Path) -> dict[str, Any]:
    """Everything that determines a unit's numbers, for its fingerprint; a model or a dataset under the root by
    its path relative to the root (a moved root's evaluations are still its own)."""
    return {
        "model": record_path(root, model),
        "model_fingerprint": model_fingerprint(model),
        "dataset": recorded_spec(root, spec),
        "dataset_signature": dataset_signature(spec),
        "config": config.for_kind(spec.kind),
    }


@dataclass
class UnitResult:
    model: str
    variant: str
    model_fingerprint: str
    values: list[MetricValue]
    status: str = "ok"
    detail: str = ""
    seconds: float = 0.0
    texts_fingerprint: str = ""  # of the texts scored (tasks/evaluate/overlap.py)
    overlap: dict[str, Any] = field(default_factory=dict)  # with the model's training input


def overlap_note(found: dict[str, Any]) -> str:
    """The report's line for a unit whose texts the model trained on ("" when none or unknown)."""
    if not found.get("overlap"):
        return ""
    return (
        f"OVERLAP: {found['overlap']} of {found['texts']} texts are in the model's training input "
        f"({found['training_input']}): not a held-out score"
    )


def run_unit(model_spec: str, spec: DatasetSpec, config: SuiteConfig, device: str | None = None) -> UnitResult:
    """Evaluate one model on one dataset; a missing data file gives status `not_run` and no values."""
    started = time.monotonic()
    try:
        data = _load(spec, config)
    except DatasetMissing as exc:
        return UnitResult(model_label(model_spec), "", model_fingerprint(model_spec), [], "not_run", str(exc))
    from tasks.evaluate.overlap import overlap, suite_texts, texts_fingerprint

    model = resolve_model(model_spec, device)
    values, detail = _evaluate(model, spec, data, config)
    texts = suite_texts(data)
    found = overlap(model_spec, texts)
    detail = "; ".join(d for d in (detail, overlap_note(found)) if d)
    seconds = time.monotonic() - started
    return UnitResult(
        model.name, model.variant, model.fingerprint, values, "ok", detail, seconds, texts_fingerprint(texts), found
    )


def _load(spec: DatasetSpec, config: SuiteConfig):
    if spec.kind == "stackoverflow":
        return load_stackoverflow(spec.path, spec.limit)
    if spec.kind == "stsb":
        return load_stsb(spec.path, spec.limit)
    if spec.kind == "lee":
        return load_lee(spec.path or None)
    if spec.kind == "beir":
        return load_beir(spec.path, config.beir_split)
    from dataclasses import replace

    demo = config.demo if not spec.limit else replace(config.demo, max_articles=spec.limit)
    return build_demo_retrieval(demo, Path(spec.path) if spec.path else None)


def _evaluate(model, spec: DatasetSpec, data, config: SuiteConfig) -> tuple[list[MetricValue], str]:
    if spec.kind == "stackoverflow":
        embeddings = None if isinstance(model, BM25Ranker) else model.encode(data.texts, config.question.batch_size)
        values = question_retrieval(model, data, config.question, embeddings)
        return values + zero_shot(model, data, config.zero_shot, embeddings), ""
    if spec.kind in SIMILARITY_KINDS:
        return sts(model, data, config.batch_size), ""
    values = dense_retrieval(model, data, config.retrieval)
    detail = f"{len(data.queries)} queries, {len(data.docs)} documents"
    if data.dropped_queries:
        detail += f", {data.dropped_queries} queries without a relevant document dropped"
    return values, detail


def unit_rows(
    result: UnitResult, spec: DatasetSpec, model_spec: str, run_fingerprint: str, created_at: float
) -> list[dict[str, Any]]:
    """Rows of the `metrics` table for one unit; a not-run unit has its expected metrics with NULL values."""
    from datetime import UTC, datetime

    common = {
        "model": result.model,
        "variant": result.variant,
        "dataset": spec.label,
        "run_fingerprint": run_fingerprint,
        "created_at": datetime.fromtimestamp(created_at, tz=UTC),
        "status": result.status,
        "detail": result.detail,
        "model_spec": model_spec,
        "model_fingerprint": result.model_fingerprint,
        "dataset_path": spec.path or ",".join(str(p) for p in dataset_files(spec)),
    }
    if result.status != "ok":
        return [
            {**common, "task": t, "metric": m, "k": k, "value": None, "n": None} for t, m, k in EXPECTED[spec.kind]
        ]
    return [
        {**common, "task": v.task, "metric": v.metric, "k": v.k, "value": v.value, "n": v.n} for v in result.values
    ]
