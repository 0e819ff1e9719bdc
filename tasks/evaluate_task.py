"""The evaluation Prefect tasks: one unit (model x dataset), the `metrics` stage with its report, artifacts.

Each unit writes `<root>/eval-unit/<fingerprint>/part-00000.parquet` (its metrics rows) and a
manifest without catalog tables; the `evaluate` stage concatenates the units of one flow run
into `<root>/evaluate/<fingerprint>/` with `report.md` and `charts/<task>.png`, and registers
the `metrics` view. A unit's fingerprint hashes the model's fingerprint (weights' bytes for a
folder), the dataset files' signature and the config of its tasks, so the same model on the
same data is never evaluated twice, across runs and across flows.
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NO_CACHE, CachePolicy

from models.encoders import model_fingerprint
from storage.fingerprint import canonical_json, fingerprint
from storage.layout import data_root, shard_name, stage_dir
from storage.manifest import is_complete, write_manifest
from storage.shards import write_shard
from storage.stage_output import build_manifest, ref_dir, stage_ref
from tasks.eval_report import METRICS_SCHEMA, REPORT_CODE_VERSION, metric_label, plot_charts, render_report
from tasks.eval_suite import DatasetSpec, SuiteConfig, dataset_signature, run_unit, unit_identity, unit_rows
from tasks.eval_tasks import EVAL_CODE_VERSION
from tasks.progress import current_logger
from tasks.stage_cache import stage_cache_policy

# A model folder overwritten in place, or an edited data file, must not hit an old cache entry.
_MODEL_AND_DATA = CachePolicy.from_cache_key_fn(
    lambda ctx, params: canonical_json([model_fingerprint(params["model"]), dataset_signature(params["dataset"])])
)


@task(name="evaluate-unit", cache_policy=stage_cache_policy(EVAL_CODE_VERSION) + _MODEL_AND_DATA)
def evaluate_unit(
    model: str, dataset: DatasetSpec, config: SuiteConfig, root: str, device: str | None = None
) -> dict[str, str]:
    """Evaluate one model on one dataset (a missing data file gives "not run" rows, never zeros)."""
    started = time.time()
    base = data_root(root)
    identity = unit_identity(model, dataset, config)
    fp = fingerprint("eval-unit", EVAL_CODE_VERSION, identity)
    out = stage_dir(base, "eval-unit", fp)
    logger = current_logger(__name__)
    if is_complete(out):
        logger.info("evaluate %s on %s: reusing %s", model, dataset.label, out)
        return stage_ref("eval-unit", fp)
    logger.info("evaluate %s on %s -> %s", model, dataset.label, out)
    result = run_unit(model, dataset, config, device)
    rows = unit_rows(result, dataset, model, fp, started)
    write_shard(out, 0, pa.Table.from_pylist(rows, schema=METRICS_SCHEMA))
    for row in rows:
        value = "not run" if row["value"] is None else f"{row['value']:.4f}"
        logger.info("  %s %s %s = %s", result.model, row["task"], metric_label(row["metric"], row["k"]), value)
    write_manifest(
        out,
        build_manifest(
            stage="eval-unit",
            fingerprint=fp,
            code_version=EVAL_CODE_VERSION,
            config=identity["config"],
            inputs={"model": model, "dataset": dataset, "files": identity["dataset_signature"]},
            upstream=[],
            tables={},
            rows={"metrics": len(rows)},
            drops={},
            started_at=started,
            timings={"evaluate_s": round(result.seconds, 3)},
            extra={"status": result.status, "detail": result.detail, "model_fingerprint": result.model_fingerprint},
        ),
    )
    return stage_ref("eval-unit", fp)


@task(name="evaluate-report", cache_policy=stage_cache_policy(REPORT_CODE_VERSION))
def write_metrics(units: list[dict[str, str]], root: str, title: str = "Evaluation") -> dict[str, str]:
    """Concatenate the units' rows into the `metrics` stage, with `report.md` and one chart per task."""
    started = time.time()
    base = data_root(root)
    fp = fingerprint("evaluate", REPORT_CODE_VERSION, {"title": title}, [u["fingerprint"] for u in units])
    out = stage_dir(base, "evaluate", fp)
    if is_complete(out):
        return stage_ref("evaluate", fp)
    tables = [pq.read_table(ref_dir(base, u) / shard_name(0), schema=METRICS_SCHEMA) for u in units]
    table = pa.concat_tables(tables) if tables else METRICS_SCHEMA.empty_table()
    write_shard(out, 0, table)
    rows = table.to_pylist()
    charts = plot_charts(rows, out / "charts")
    (out / "report.md").write_text(
        render_report(rows, {t: f"charts/{name}" for t, name in charts.items()}, title), encoding="utf-8"
    )
    not_run = sorted({f"{r['model']} on {r['dataset']}" for r in rows if r["status"] != "ok"})
    write_manifest(
        out,
        build_manifest(
            stage="evaluate",
            fingerprint=fp,
            code_version=REPORT_CODE_VERSION,
            config={"title": title},
            inputs={"units": [u["path"] for u in units]},
            upstream=units,
            tables={"metrics": "part-*.parquet"},
            rows={"metrics": table.num_rows},
            drops={"not_run_units": len(not_run)},
            started_at=started,
            extra={
                "report": "report.md",
                "charts": sorted(f"charts/{n}" for n in charts.values()),
                "not_run": not_run,
            },
        ),
    )
    return stage_ref("evaluate", fp)


@task(name="publish-evaluation", cache_policy=NO_CACHE)
def publish_evaluation(metrics: dict[str, str], root: str) -> str:
    """Prefect table and markdown artifacts (a side effect: never cached); returns the report path."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    out = ref_dir(data_root(root), metrics)
    report = out / "report.md"
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
    return str(Path(report))
