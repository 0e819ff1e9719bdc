"""The `evaluate` flow: every model on every configured dataset -> `metrics` table, report, charts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow

from flows.parameters import EvaluateParams, evaluation_sets
from storage.builds_lock import holds_root
from storage.layout import data_root
from tasks.evaluate.models import BASELINES, model_fingerprint
from tasks.evaluate.scoring import QuestionRetrievalConfig, RetrievalConfig, ZeroShotConfig
from tasks.evaluate.suite import DatasetSpec, SuiteConfig, applicable
from tasks.evaluate.task import evaluate_unit, publish_evaluation, write_metrics
from tasks.runtime.catalog import catalog_at_end
from tasks.runtime.dask_cluster import dask_scheduler, map_units
from tasks.runtime.parameters import takes
from tasks.runtime.stage_cache import run_stage

REPO = Path(__file__).resolve().parents[1]


def _path(path: str) -> str:
    """Relative paths resolve against the repository root (where the deployment runs)."""
    return str((REPO / path).resolve()) if path and not Path(path).is_absolute() else path


def _model(spec: str) -> str:
    kind, sep, arg = spec.partition(":")
    if kind in BASELINES:
        if kind == "word2vec" and arg:
            corpus, hash_, field = arg.partition("#")
            return f"word2vec:{_path(corpus)}{hash_}{field}"
        return spec
    return _path(spec)


def unit_calls(p: EvaluateParams) -> list[dict[str, Any]]:
    """The evaluation's units (model x dataset) as `evaluate_unit`'s keyword arguments, without the root: what the
    flow runs, and what a night's plan checks for units already on disk (a unit is never scored twice)."""
    specs = []
    if p.stackoverflow:
        specs.append(DatasetSpec("stackoverflow", _path(p.stackoverflow), limit=p.limit))
    specs += [DatasetSpec("stsb", _path(f), limit=p.limit) for f in p.stsb]
    specs += [DatasetSpec("lee")] if p.lee else []
    specs += [DatasetSpec("demo", limit=p.demo_max_articles)] if p.demo_retrieval else []
    specs += [DatasetSpec("beir", _path(f)) for f in p.beir or []]
    names = p.models if p.models is not None else list(BASELINES)
    for name in names:  # fail before any work on a model string that names nothing
        model_fingerprint(_model(name))
    config = SuiteConfig(
        retrieval=RetrievalConfig(batch_size=p.batch_size),
        question=QuestionRetrievalConfig(max_queries=p.question_queries, batch_size=p.batch_size),
        zero_shot=ZeroShotConfig(batch_size=p.batch_size),
        beir_split=p.beir_split,
        batch_size=p.batch_size,
    )
    return [
        {"model": _model(m), "dataset": spec, "config": config, "device": p.device}
        for m in names
        for spec in specs
        if applicable(m, spec.kind)
    ]


@flow(name="evaluate", log_prints=True)
@holds_root  # a gc never runs meanwhile (storage/builds_lock.py)
@takes(EvaluateParams)  # the signature: every parameter with its default
def evaluate(**params: Any) -> dict:
    """Evaluate model folders and baselines (default: all five baselines) on the configured sets.

    `stsb=None` takes the en and zh dev files; `[]` or `stackoverflow=""` skips a set. A default file
    this machine lacks (the shared data's) is skipped with a printed note; a given file that does not
    exist is reported as not run. `limit` > 0 keeps the first rows of each file and
    `demo_max_articles` > 0 the first articles of the demo corpus: smoke tests, not benchmarks.
    `dask`: `"local"` (a cluster of `workers` processes) or a scheduler address evaluates the units
    (model x dataset) as mapped tasks there; the rows are the same.
    """
    p, notes = evaluation_sets(EvaluateParams(**params))  # no set left: an error before any work
    for note in notes:
        print(note)
    base = data_root(p.root)
    calls = unit_calls(p)
    with dask_scheduler(p.dask, p.workers, base) as address:
        if address:
            on_cluster = [{**c, "root": str(base)} for c in calls]
            units = map_units(evaluate_unit, on_cluster, address, progress="evaluate: {done}/{total} units done")
        else:
            units = [run_stage(evaluate_unit, base, **c) for c in calls]
    metrics = run_stage(write_metrics, base, units=units)
    report = publish_evaluation(metrics, str(base))
    catalog_at_end(str(base), [metrics])
    return {"metrics": metrics, "units": units, "report": report}
