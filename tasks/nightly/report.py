"""What a nightly decision reads and shows: metrics by model from an `evaluate` output, the settings
fingerprint that says whether anything is new, and the markdown artifact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from storage.fingerprint import fingerprint
from storage.progress import current_logger
from storage.stage_output import ref_dir
from tasks.nightly.config import NightlyConfig


def metric_key(row: dict[str, Any]) -> str:
    """`dataset/task/metric[@k]`, the names the gate's configuration uses."""
    k = row.get("k")
    return f"{row['dataset']}/{row['task']}/{row['metric']}" + (f"@{k}" if k is not None else "")


def metrics_by_model(root: Path, metrics_ref: dict[str, str]) -> dict[str, dict[str, float]]:
    import pyarrow.parquet as pq

    rows = [
        row
        for path in sorted(ref_dir(root, metrics_ref).glob("part-*.parquet"))
        for row in pq.read_table(path).to_pylist()
    ]
    out: dict[str, dict[str, float]] = {}
    for row in rows:
        if row["status"] == "ok" and row["value"] is not None:
            out.setdefault(row["model_spec"], {})[metric_key(row)] = float(row["value"])
    return out


def training_settings(cfg: NightlyConfig) -> str:
    """What, besides the data, decides the candidate: a new value here means something new to train."""
    return fingerprint("nightly-train", "v1", {"train": cfg.train, "keywords": cfg.keywords})


def decision_markdown(decision: str, reason: str, candidate: str, champion: str, metrics: dict, names: list) -> str:
    lines = [
        f"# nightly-retrain: **{decision}**",
        "",
        reason,
        "",
        f"- candidate: `{candidate}`",
        f"- champion: `{champion}`",
    ]
    if names:
        lines += ["", "| metric | candidate | champion |", "|---|---|---|"]
        cand, champ = metrics.get(candidate, {}), metrics.get(champion, {})
        for name in names:
            fmt = lambda v: "-" if v is None else f"{v:.4f}"  # noqa: E731
            lines.append(f"| {name} | {fmt(cand.get(name))} | {fmt(champ.get(name))} |")
    return "\n".join(lines) + "\n"


def publish(markdown: str) -> None:
    try:
        from prefect.artifacts import create_markdown_artifact

        create_markdown_artifact(markdown, key="nightly-decision", description="nightly-retrain decision")
    except Exception as exc:  # never fail a decision for its artifact
        current_logger(__name__).debug("no artifact: %s", exc)
