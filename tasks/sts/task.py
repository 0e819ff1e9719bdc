"""The `sts` Prefect tasks: one unit per (family, language, seed, config), the report stage, artifacts.

A unit writes `<root>/sts-unit/<fingerprint>/`: `part-00000.parquet` (its `metrics` rows, task
`sts_supervised`: mse, pearson, spearman per eval split), `predictions.parquet`, `train_log.parquet`
and, for LoRA units, `adapter/`. Its fingerprint hashes the family, the model folder's weights,
the language, the training config (seed included) and the data files' contents, so a rerun reuses
every finished unit and an interrupted table resumes at the first unfinished one. The `sts` stage
concatenates one run's units into `<root>/sts/<fingerprint>/` with `report.md` and `sts.png`, and
its manifest registers the rows in the catalog's `metrics` view.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NO_CACHE

from storage.atomic import atomic_path
from storage.fingerprint import file_sha256, fingerprint
from storage.layout import data_root, shard_name
from storage.progress import current_logger
from storage.shards import write_shard
from storage.stage_output import StageOutput, ref_dir
from tasks.evaluate.report import METRICS_SCHEMA
from tasks.runtime.artifacts import publish_or_warn
from tasks.runtime.stage_cache import STAGE_TASK
from tasks.sts.data import read_sts_csv, split_holdout, sts_metrics
from tasks.sts.families import FIXED, Family, config_record, parse_family, run_family, train_config

STS_CODE_VERSION = "sts-unit-v1"
STS_REPORT_VERSION = "sts-report-v1"
TASK = "sts_supervised"
METRICS = ("mse", "pearson", "spearman")


@dataclass(frozen=True)
class StsFiles:
    """One language's CSVs; `test` is optional (the STS-B test split is held back by default).
    `holdout` > 0: that share of `train` (seeded) is not trained on but scored, as split `holdout`."""

    lang: str
    train: str
    dev: str
    test: str = ""
    holdout: float = 0.0

    def splits(self) -> dict[str, str]:
        return {"dev": self.dev, **({"test": self.test} if self.test else {})}

    def dataset(self, split: str) -> tuple[str, str]:
        """(dataset name, file) of a scored split: `stsb-en-train-holdout20` for the holdout."""
        if split == "holdout":
            return f"{dataset_name(self.train)}-holdout{round(self.holdout * 100):g}", self.train
        path = self.splits()[split]
        return dataset_name(path), path


def dataset_name(path: str) -> str:
    return Path(path).stem  # stsb-en-dev


def model_source(family: Family, root: Path) -> tuple[Path | None, str | None]:
    """(model folder, its fingerprint) for transformer families; (None, None) for word-level ones."""
    from models.encoders import folder_fingerprint, minilm_path

    if family.kind in ("wordvec", "recurrent"):
        return None, None
    if family.arg == "minilm":
        folder = minilm_path()
    elif family.arg == "mpnet":
        from tasks.sts.models import mpnet_folder

        folder = mpnet_folder(root)
    elif family.arg == "smollm2":
        from tasks.sts.models import smollm2_folder

        folder = smollm2_folder(root)
    else:
        folder = Path(family.arg)
    return folder, folder_fingerprint(folder)


def _resources(lang: str) -> dict:
    from tasks.evaluate.models import corpus_sentences, load_glove
    from tasks.ingest.readers import default_corpus

    return {"glove": load_glove, "demo_sentences": lambda: corpus_sentences(default_corpus())}


def unit_rows(
    family: Family, files: StsFiles, variant: str, predictions: dict, golds: dict, detail: str, fp: str, model_fp: str
) -> list[dict]:
    created = np.datetime64(int(time.time() * 1e6), "us").astype(object)
    rows = []
    for split, pred in predictions.items():
        name, path = files.dataset(split)
        values = sts_metrics(pred, golds[split])
        rows += [
            {
                "model": family.label,
                "variant": variant,
                "dataset": name,
                "task": TASK,
                "metric": metric,
                "k": None,
                "value": values[metric],
                "run_fingerprint": fp,
                "created_at": created,
                "status": "ok",
                "detail": detail,
                "n": len(pred),
                "model_spec": family.spec,
                "model_fingerprint": model_fp,
                "dataset_path": str(path),
            }
            for metric in METRICS
        ]
    return rows


def describe(config) -> str:
    """The settings a reader needs beside the numbers (the manifest has the whole config)."""
    parts = [f"epochs={config.epochs:g}", f"lr={config.lr:g}", f"batch={config.batch_size}", f"len={config.max_len}"]
    parts += [f"subsample={config.subsample}"] if config.subsample else []
    parts += [f"+cosent x{config.rank_weight:g}"] if config.rank_weight else []
    parts += ["mean-pool"] if config.pooling == "mean" else []
    parts += ["both orders"] if config.symmetric else []
    parts += ["bf16"] if config.dtype == "bf16" else []  # its row must not read as the fp32 run's
    return " ".join(parts)


def unit_identity(family: Family, files: StsFiles, seed: int, preset: str, overrides: dict | None, root: Path) -> dict:
    config = train_config(family, preset, seed, overrides)
    folder, model_fp = model_source(family, root)
    return {
        # a folder given by path counts by its weights (model_fingerprint), not by where it lies
        "family": family.spec if family.spec in FIXED else family.kind,
        "model_fingerprint": model_fp,
        "lang": files.lang,
        "seed": seed,
        "preset": preset,
        "config": config_record(config),
        "data": {name: file_sha256(path) for name, path in {"train": files.train, **files.splits()}.items()},
        **({"holdout": files.holdout} if files.holdout else {}),  # absent at 0: earlier units keep their fingerprints
    }


def write_unit_files(folder: Path, rows: list[dict], result, golds: dict[str, np.ndarray], kind: str) -> None:
    """A unit's metrics shard, its predictions against the gold scores, its training log and (LoRA) its adapter."""
    write_shard(folder, 0, pa.Table.from_pylist(rows, schema=METRICS_SCHEMA))
    with atomic_path(folder / "predictions.parquet") as tmp:
        pq.write_table(
            pa.table(
                {
                    "split": [s for s, p in result.predictions.items() for _ in p],
                    "pair": [i for p in result.predictions.values() for i in range(len(p))],
                    "prediction": np.concatenate(list(result.predictions.values())),
                    "gold": np.concatenate([golds[s] for s in result.predictions]),
                }
            ),
            tmp,
        )
    if result.log:
        with atomic_path(folder / "train_log.parquet") as tmp:
            pq.write_table(pa.Table.from_pylist(result.log), tmp)
    if kind == "llm-lora":
        with atomic_path(folder / "adapter") as tmp:
            result.scorer.save_adapter(tmp)


@task(name="sts-unit", **STAGE_TASK)
def sts_unit(
    family: str, files: StsFiles, seed: int, preset: str, root: str, overrides: dict | None = None
) -> dict[str, str]:
    """Train and score one family on one language with one seed (reused when already complete)."""
    logger = current_logger(__name__)
    fam = parse_family(family)
    base = data_root(root)
    identity = unit_identity(fam, files, seed, preset, overrides, base)
    out = StageOutput.open(root, "sts-unit", fingerprint("sts-unit", STS_CODE_VERSION, identity), log=logger)
    if out.complete:
        return out.cached()
    config = train_config(fam, preset, seed, overrides)
    train = read_sts_csv(files.train)
    evals = {split: read_sts_csv(path) for split, path in files.splits().items()}
    if files.holdout:
        train, held = split_holdout(train, files.holdout)
        evals = {"holdout": held, **evals}
    folder, _ = model_source(fam, base)
    logger.info("sts %s (%s, seed %d, %s) -> %s", fam.label, files.lang, seed, preset, out.dir)
    started = time.perf_counter()
    result = run_family(fam, files.lang, config, train, evals, folder, _resources(files.lang))
    seconds = time.perf_counter() - started
    variant = f"{preset} seed={seed} " + (describe(config) if config else "zero-shot")
    variant += f" holdout={files.holdout:g}" if files.holdout else ""  # its dev rows trained on less: say so
    golds = {split: pairs.score for split, pairs in evals.items()}
    rows = unit_rows(
        fam,
        files,
        variant,
        result.predictions,
        golds,
        result.detail,
        out.fingerprint,
        identity["model_fingerprint"] or "",
    )
    write_unit_files(out.dir, rows, result, golds, fam.kind)
    for row in rows:
        logger.info("  %s %s %s = %.4f", fam.label, row["dataset"], row["metric"], row["value"])
    return out.finish(
        code_version=STS_CODE_VERSION,
        config=identity,
        inputs={"family": family, "files": files, "model_folder": str(folder) if folder else None},
        upstream=[],
        tables={},
        rows={"metrics": len(rows), "train_pairs": len(train), "train_steps": len(result.log)},
        drops={"blank_lines": train.rejects + sum(p.rejects for p in evals.values())},
        timings={"train_s": round(result.train_s, 3), "unit_s": round(seconds, 3)},
        extra={"detail": result.detail, "family": fam.label, "lang": files.lang, "seed": seed},
    )


@task(name="sts-report", **STAGE_TASK)
def sts_report(units: list[dict[str, str]], root: str) -> dict[str, str]:
    """One run's units -> the `metrics` rows of the catalog, `report.md` (the survey's table beside
    ours) and `sts.png`."""
    from tasks.sts.report import plot_sts, render_sts_report

    fp = fingerprint("sts", STS_REPORT_VERSION, {}, [u["fingerprint"] for u in units])
    stage = StageOutput.open(root, "sts", fp, log=current_logger(__name__))
    if stage.complete:
        return stage.cached()
    base, out = stage.root, stage.dir
    table = pa.concat_tables([pq.read_table(ref_dir(base, u) / shard_name(0), schema=METRICS_SCHEMA) for u in units])
    write_shard(out, 0, table)
    timings = {}
    for u in units:
        from storage.stage_output import ref_manifest

        m = ref_manifest(base, u)
        timings[u["fingerprint"]] = m["timings"].get("unit_s", 0.0)
    rows = table.to_pylist()
    plot_sts(rows, out / "sts.png")
    (out / "report.md").write_text(render_sts_report(rows, timings, "sts.png"), encoding="utf-8")
    return stage.finish(
        code_version=STS_REPORT_VERSION,
        config={},
        inputs={"units": [u["path"] for u in units]},
        upstream=units,
        tables={"metrics": "part-*.parquet"},
        rows={"metrics": table.num_rows, "units": len(units)},
        drops={},
        extra={"report": "report.md", "charts": ["sts.png"]},
    )


@task(name="publish-sts", cache_policy=NO_CACHE)
def publish_sts(report: dict[str, str], root: str) -> str:
    """The report as a Prefect markdown artifact (a side effect: never cached; one that fails to publish is a
    warning, never a failed run); returns its path."""
    out = ref_dir(data_root(root), report)

    def make() -> None:
        from prefect.artifacts import create_markdown_artifact

        text = (out / "report.md").read_text(encoding="utf-8")
        create_markdown_artifact(
            markdown=text + f"\n\nChart and Parquet: `{out}`\n", key="sts-report", description="supervised STS-B"
        )

    publish_or_warn(make, "sts")
    return str(out / "report.md")
