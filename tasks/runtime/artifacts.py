"""Prefect artifacts of the `build-pairs` and `train` flows, read from the stage manifests, and
`publish_or_warn`, the one way every flow publishes its artifacts.

The rows and the markdown are built by pure functions (tested on hand-made manifests);
`publish_*` hands them to Prefect through `publish_or_warn`: an artifact that fails to publish is a
warning in the run's log, never a failed run (build-pairs, train, mine-keywords, evaluate, sts and
the nightly decision alike). Keys are fixed (`build-pairs-stages`, `build-pairs-outputs`,
`train-report`, `train-summary`), so each flow run adds a new version of the same artifact in the UI.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from storage.progress import current_logger
from storage.stage_output import ref_dir, ref_manifest


def stage_status(manifest: dict[str, Any], since: float) -> str:
    """`built` when the output was finished during this flow run (started at `since`), else `cached`."""
    return "built" if float(manifest.get("finished_at", 0.0)) >= since else "cached"


def _counts(counts: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in counts.items())


def stage_rows(root: Path, refs: dict[str, dict[str, str]], since: float) -> list[dict[str, Any]]:
    """One row per stage (in the flow's order): stage, fingerprint, cached/built, rows, drops, seconds, folder."""
    rows = []
    for ref in refs.values():
        manifest = ref_manifest(root, ref)
        rows.append(
            {
                "stage": ref["stage"],
                "fingerprint": ref["fingerprint"],
                "status": stage_status(manifest, since),
                "rows": _counts(manifest.get("rows", {})),
                "drops": _counts(manifest.get("drops", {})),
                "seconds": manifest.get("timings", {}).get("total_s"),
                "folder": str(ref_dir(root, ref)),
            }
        )
    return rows


def outputs_markdown(root: Path, refs: dict[str, dict[str, str]]) -> str:
    """Where each table's Parquet files are (globs a DuckDB `read_parquet` takes as they are)."""
    lines = ["# build-pairs outputs", "", f"Data root: `{root}`; catalog: `{root / 'catalog.duckdb'}`", ""]
    for name, ref in refs.items():
        folder = ref_dir(root, ref)
        lines.append(f"- **{name}** (`{ref['stage']}` {ref['fingerprint'][:12]}): `{folder}`")
        for table, glob in ref_manifest(root, ref).get("tables", {}).items():
            lines.append(f"  - {table}: `{folder / glob}`")
    return "\n".join(lines) + "\n"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def train_summary_rows(root: Path, ref: dict[str, str], since: float) -> list[dict[str, str]]:
    """The run as (field, value) rows: status, steps, params, chance, the final logged row, paths."""
    manifest = ref_manifest(root, ref)
    out = ref_dir(root, ref)
    summary = manifest.get("summary", {})
    acc = summary.get("heldout_acc") or []
    fields: dict[str, Any] = {
        "fingerprint": ref["fingerprint"],
        "status": stage_status(manifest, since),
        **{k: v for k, v in manifest.get("labels", {}).items()},
        "steps": manifest.get("rows", {}).get("steps"),
        "max_steps": summary.get("max_steps"),
        "params": summary.get("params"),
        "chance": summary.get("chance"),
        "heldout_acc (last)": acc[-1][1] if acc else None,
        **{f"final {k}": v for k, v in manifest.get("final", {}).items() if k != "step"},
        "seconds": manifest.get("timings", {}).get("total_s"),
        "folder": str(out),
        # a mixed run: its weight, and where and how long the training ran
        **(
            {
                "interpolate": manifest.get("config", {}).get("interpolate"),
                "trained in": str(ref_dir(root, manifest["unmixed"])),
                "training seconds": manifest.get("unmixed_total_s"),
            }
            if manifest.get("unmixed")
            else {}
        ),
        "export": str(out / manifest["export"]) if manifest.get("export") else None,
    }
    return [{"field": k, "value": _fmt(v)} for k, v in fields.items() if v is not None]


def heldout_table(summary: dict[str, Any]) -> list[str]:
    """Markdown rows of the held-out in-batch accuracy by step, with chance for reference."""
    acc = summary.get("heldout_acc") or []
    if not acc:
        return ["No held-out evaluation was run."]
    chance = summary.get("chance")
    head = f"Held-out in-batch retrieval accuracy (chance {_fmt(chance)}):" if chance else "Held-out accuracy:"
    return [head, "", "| step | heldout_acc |", "|---:|---:|", *(f"| {s} | {_fmt(a)} |" for s, a in acc)]


def trained_dir(root: Path, ref: dict[str, str]) -> Path:
    """The folder holding a run's curves, metrics and `summary.json`: its own, or for a run whose export is
    mixed with the start's weights (`interpolate`) the unmixed run's, where the training happened."""
    unmixed = ref_manifest(root, ref).get("unmixed")
    return ref_dir(root, unmixed if unmixed else ref)


def train_markdown(root: Path, ref: dict[str, str], since: float, inline_limit: int = 2_000_000) -> str:
    """The loss curve (inline as a data URI: the UI cannot read the data root) and the held-out table."""
    manifest = ref_manifest(root, ref)
    labels = " ".join(manifest.get("labels", {}).values())
    status = stage_status(manifest, since)
    lines = [f"# train {labels} {ref['fingerprint'][:12]} ({status})", ""]
    lines += [f"{manifest.get('rows', {}).get('steps')} steps; run folder `{ref_dir(root, ref)}`", ""]
    out = trained_dir(root, ref)
    if out != ref_dir(root, ref):
        weight = manifest.get("config", {}).get("interpolate")
        lines += [f"export mixed with the start's weights at {weight}; trained (curves below) in `{out}`", ""]
    curve = out / "loss_curve.png"
    if curve.exists() and curve.stat().st_size <= inline_limit:
        data = base64.b64encode(curve.read_bytes()).decode("ascii")
        lines += [f"![loss curve](data:image/png;base64,{data})", "", f"loss curve: `{curve}`", ""]
    elif curve.exists():
        lines += [f"loss curve: `{curve}`", ""]
    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.exists() else {}
    lines += heldout_table(summary or manifest.get("summary", {}))
    return "\n".join(lines) + "\n"


def publish_or_warn(make: Callable[[], object], what: str) -> None:
    """Call `make()`, which builds and creates `what`'s artifacts. An artifact is a convenience: one that
    fails to publish (a server gone, a report unreadable) is a warning in the run's log, never a failed run."""
    try:
        make()
    except Exception as exc:
        current_logger(__name__).warning("no %s artifacts: %s: %s", what, type(exc).__name__, exc)


def publish_build_artifacts(root: Path, refs: dict[str, dict[str, str]], since: float) -> None:
    """`build-pairs-stages` (table) and `build-pairs-outputs` (markdown) for one flow run."""

    def make() -> None:
        from prefect.artifacts import create_markdown_artifact, create_table_artifact

        create_table_artifact(stage_rows(root, refs, since), key="build-pairs-stages", description="stages of the run")
        create_markdown_artifact(outputs_markdown(root, refs), key="build-pairs-outputs", description="Parquet")

    publish_or_warn(make, "build-pairs")


def publish_train_artifacts(root: Path, ref: dict[str, str], since: float) -> None:
    """`train-report` (markdown: loss curve, held-out accuracy) and `train-summary` (table) for one run."""

    def make() -> None:
        from prefect.artifacts import create_markdown_artifact, create_table_artifact

        create_markdown_artifact(train_markdown(root, ref, since), key="train-report", description="loss and accuracy")
        create_table_artifact(train_summary_rows(root, ref, since), key="train-summary", description="run summary")

    publish_or_warn(make, "train")
