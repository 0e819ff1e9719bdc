"""The evaluation Prefect tasks: one unit (model x dataset), the `metrics` stage with its report, artifacts.

Each unit writes `<root>/eval-unit/<fingerprint>/part-00000.parquet` (its metrics rows),
`queries.parquet` (each query's value of the ranking metrics, for paired tests) and a manifest
without catalog tables (it records the scored texts' fingerprint and their overlap with the
model's training input); the `evaluate` stage concatenates the units of one flow run
into `<root>/evaluate/<fingerprint>/` with `report.md` and `charts/<task>.png`, and registers
the `metrics` view. A unit's fingerprint hashes the model's fingerprint (weights' bytes for a
folder), the dataset files' signature and the config of its tasks, so the same model on the
same data is never evaluated twice, across runs and across flows.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NO_CACHE

from storage.fingerprint import fingerprint
from storage.layout import data_root, shard_name
from storage.progress import current_logger
from storage.shards import write_shard
from storage.stage_output import StageOutput, ref_complete, ref_dir, stage_ref
from tasks.evaluate.report import METRICS_SCHEMA, REPORT_CODE_VERSION, metric_label, plot_charts, render_report
from tasks.evaluate.scoring import EVAL_CODE_VERSION, MetricValue
from tasks.evaluate.suite import DatasetSpec, SuiteConfig, run_unit, unit_identity, unit_rows
from tasks.runtime.artifacts import publish_or_warn
from tasks.runtime.stage_cache import STAGE_TASK

QUERIES = "queries.parquet"  # a unit's per-query values (ranking metrics), beside its metrics shard
QUERIES_SCHEMA = pa.schema(
    [("task", pa.string()), ("metric", pa.string()), ("k", pa.int32()), ("query", pa.int64()), ("value", pa.float64())]
)


@task(name="evaluate-unit", **STAGE_TASK)
def evaluate_unit(
    model: str, dataset: DatasetSpec, config: SuiteConfig, root: str, device: str | None = None
) -> dict[str, str]:
    """Evaluate one model on one dataset (a missing data file gives "not run" rows, never zeros)."""
    # The identity hashes the model's weights and the data files: a model overwritten in place
    # or an edited data file is a new unit, never an old result.
    identity = unit_identity(model, dataset, config, data_root(root))
    logger = current_logger(__name__)
    out = StageOutput.open(root, "eval-unit", unit_fingerprint(identity), log=logger)
    if out.complete:
        return out.cached()
    logger.info("evaluate %s on %s -> %s", model, dataset.label, out.dir)
    result = run_unit(model, dataset, config, device)
    rows = unit_rows(result, identity["dataset"], identity["model"], out.fingerprint, out.started_at)
    write_shard(out.dir, 0, pa.Table.from_pylist(rows, schema=METRICS_SCHEMA))
    per_query = query_table(result.values)
    if per_query.num_rows:
        pq.write_table(per_query, out.dir / QUERIES)
    for row in rows:
        value = "not run" if row["value"] is None else f"{row['value']:.4f}"
        logger.info("  %s %s %s = %s", result.model, row["task"], metric_label(row["metric"], row["k"]), value)
    return out.finish(
        code_version=EVAL_CODE_VERSION,
        config=identity["config"],
        inputs={"model": identity["model"], "dataset": identity["dataset"], "files": identity["dataset_signature"]},
        upstream=[],
        tables={},
        rows={"metrics": len(rows)},
        drops={},
        timings={"evaluate_s": round(result.seconds, 3)},
        extra={
            "status": result.status,
            "detail": result.detail,
            "model_fingerprint": result.model_fingerprint,
            "texts_fingerprint": result.texts_fingerprint,
            "overlap": result.overlap,
            "per_query": QUERIES if per_query.num_rows else None,
        },
    )


def unit_fingerprint(identity: dict) -> str:
    return fingerprint("eval-unit", EVAL_CODE_VERSION, identity)


def unit_done(model: str, dataset: DatasetSpec, config: SuiteConfig, root: str, device: str | None = None) -> bool:
    """Whether `evaluate_unit` with these arguments would reuse a complete unit on disk (a night's plan)."""
    identity = unit_identity(model, dataset, config, data_root(root))
    return ref_complete(data_root(root), stage_ref("eval-unit", unit_fingerprint(identity)))


def query_table(values: list[MetricValue]) -> pa.Table:
    """Per-query values of the ranking metrics: (task, metric, k, query row in the dataset, value)."""
    rows = [
        {"task": v.task, "metric": v.metric, "k": v.k, "query": int(q), "value": float(x)}
        for v in values
        if v.per_query is not None
        for q, x in zip(v.queries, v.per_query, strict=True)
    ]
    return pa.Table.from_pylist(rows, schema=QUERIES_SCHEMA)


@task(name="evaluate-report", **STAGE_TASK)
def write_metrics(units: list[dict[str, str]], root: str, title: str = "Evaluation") -> dict[str, str]:
    """Concatenate the units' rows into the `metrics` stage, with `report.md` and one chart per task."""
    fp = fingerprint("evaluate", REPORT_CODE_VERSION, {"title": title}, [u["fingerprint"] for u in units])
    stage = StageOutput.open(root, "evaluate", fp, log=current_logger(__name__))
    if stage.complete:
        return stage.cached()
    base, out = stage.root, stage.dir
    tables = [pq.read_table(ref_dir(base, u) / shard_name(0), schema=METRICS_SCHEMA) for u in units]
    table = pa.concat_tables(tables) if tables else METRICS_SCHEMA.empty_table()
    write_shard(out, 0, table)
    rows = table.to_pylist()
    charts = plot_charts(rows, out / "charts")
    (out / "report.md").write_text(
        render_report(rows, {t: f"charts/{name}" for t, name in charts.items()}, title), encoding="utf-8"
    )
    not_run = sorted({f"{r['model']} on {r['dataset']}" for r in rows if r["status"] != "ok"})
    return stage.finish(
        code_version=REPORT_CODE_VERSION,
        config={"title": title},
        inputs={"units": [u["path"] for u in units]},
        upstream=units,
        tables={"metrics": "part-*.parquet"},
        rows={"metrics": table.num_rows},
        drops={"not_run_units": len(not_run)},
        extra={
            "report": "report.md",
            "charts": sorted(f"charts/{n}" for n in charts.values()),
            "not_run": not_run,
        },
    )


@task(name="publish-evaluation", cache_policy=NO_CACHE)
def publish_evaluation(metrics: dict[str, str], root: str) -> str:
    """Prefect table and markdown artifacts (a side effect: never cached; one that fails to publish is a
    warning, never a failed run); returns the report path."""
    out = ref_dir(data_root(root), metrics)
    report = out / "report.md"

    def make() -> None:
        from prefect.artifacts import create_markdown_artifact, create_table_artifact

        rows = pq.read_table(out / shard_name(0)).to_pylist()
        table = [
            {
                "model": r["model"],
                "variant": r["variant"],
                "dataset": r["dataset"],
                "task": r["task"],
                "metric": r["metric"] if r["k"] is None else f"{r['metric']}@{r['k']}",
                "value": "not run" if r["status"] != "ok" else (None if r["value"] is None else round(r["value"], 4)),
                "n": r["n"],
            }
            for r in rows
        ]
        create_table_artifact(table=table, key="evaluation-metrics", description=f"metrics table: {out}")
        create_markdown_artifact(
            markdown=report.read_text(encoding="utf-8") + f"\n\nCharts and Parquet: `{out}`\n",
            key="evaluation-report",
            description="models side by side with published numbers",
        )

    publish_or_warn(make, "evaluation")
    return str(Path(report))
