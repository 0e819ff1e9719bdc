"""What a nightly decision reads and shows: metrics by model from an `evaluate` output, the settings
fingerprint that says whether anything is new, and the markdown artifact."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import prefect.artifacts

from models.training.presets import DOCUMENT_PRESETS, PRESETS, resolve_preset
from storage.fingerprint import fingerprint
from storage.layout import recorded_path
from storage.shards import read_shard
from storage.stage_output import ref_complete, ref_dir, ref_manifest
from tasks.evaluate.suite import DatasetSpec
from tasks.evaluate.task import QUERIES
from tasks.nightly.config import KeywordsSection, TrainSection
from tasks.nightly.fair_queries import Shared
from tasks.nightly.recipe import GUR_NIGHT
from tasks.nightly.significance import PairedTest
from tasks.runtime.artifacts import publish_or_warn


def metric_key(row: dict[str, Any]) -> str:
    """`dataset/task/metric[@k]`, the names the gate's configuration uses."""
    k = row.get("k")
    return f"{row['dataset']}/{row['task']}/{row['metric']}" + (f"@{k}" if k is not None else "")


def metrics_by_model(root: Path, metrics_ref: dict[str, str]) -> dict[str, dict[str, float]]:
    rows = [
        row
        for path in sorted(ref_dir(root, metrics_ref).glob("part-*.parquet"))
        for row in read_shard(path).to_pylist()
    ]
    out: dict[str, dict[str, float]] = {}
    for row in rows:
        if row["status"] == "ok" and row["value"] is not None:
            spec = recorded_path(root, row["model_spec"])  # an evaluation from before the root moved: as now
            out.setdefault(spec, {})[metric_key(row)] = float(row["value"])
    return out


def primary_evidence(
    root: Path, units: list[dict[str, str]], primary: str, candidate: str, champion: str
) -> dict[str, Any]:
    """What the paired test and the overlap check read from the evaluation units of the primary metric's
    dataset: each model's per-query values (aligned by query, None when missing or when the two units
    scored different texts), without the queries whose texts the candidate trained on (tasks/nightly/
    fair_queries.py: `shared`, None when its training input is unknown; `dropped`, how many were left out),
    and the suite's texts fingerprint."""
    dataset, task, metric = primary.split("/", 2)
    metric, _, k = metric.partition("@")
    found: dict[str, tuple[dict, dict[int, float]]] = {}
    for ref in units:
        manifest = ref_manifest(root, ref)
        model = recorded_path(root, manifest["inputs"]["model"])  # a unit evaluated before the root moved
        if model not in (candidate, champion) or DatasetSpec(**manifest["inputs"]["dataset"]).label != dataset:
            continue
        values: dict[int, float] = {}
        path = ref_dir(root, ref) / QUERIES
        if path.exists():
            for row in read_shard(path).to_pylist():
                if row["task"] == task and row["metric"] == metric and row["k"] == (int(k) if k else None):
                    values[row["query"]] = row["value"]
        found[model] = (manifest, values)
    cand, champ = found.get(candidate, ({}, {})), found.get(champion, ({}, {}))
    same_texts = cand[0].get("texts_fingerprint") and cand[0].get("texts_fingerprint") == champ[0].get(
        "texts_fingerprint"
    )
    queries = sorted(cand[1]) if same_texts and cand[1] and sorted(cand[1]) == sorted(champ[1]) else []
    shared = shared_of(root, cand[0], candidate)
    kept = [q for q in queries if shared is None or q not in shared.queries]
    return {
        "candidate": np.array([cand[1][q] for q in kept]) if kept else None,
        "champion": np.array([champ[1][q] for q in kept]) if kept else None,
        "shared": shared,
        "dropped": len(queries) - len(kept),
        "overlap": (cand[0].get("overlap") or {}).get("overlap"),  # texts the candidate trained on
        "suite_fingerprint": cand[0].get("texts_fingerprint"),
    }


def shared_of(root: Path, manifest: dict[str, Any], candidate: str) -> Shared | None:
    """The suite's texts the candidate trained on, from its unit's manifest: none to look for when the unit
    counted none (the usual night: no dataset read again), None when its training input is unknown."""
    counted = (manifest.get("overlap") or {}).get("overlap")
    if counted is None:
        return None
    if counted == 0:
        return Shared(0, 0)
    spec = DatasetSpec(**manifest["inputs"]["dataset"])
    return Shared.of(candidate, replace(spec, path=str(recorded_path(root, spec.path))) if spec.path else spec)


def training_settings(train: TrainSection, keywords: KeywordsSection) -> str:
    """What, besides the data, decides the candidate: a new value here means something new to train. `train`
    with its method resolved. A question preset counts by its values, not its name: a release that changes
    `cpu` retrains once."""
    preset = PRESETS[resolve_preset(train.preset, gpu=False)] if train.method == "tfcsg" else {}
    if train.method == "documents":
        preset = DOCUMENT_PRESETS["cpu"]
    if train.method == "gur":
        preset = GUR_NIGHT
    return fingerprint("nightly-train", "v1", {"train": train, "keywords": keywords, "preset": preset})


NIGHT_COUNTS = ("files_new", "files_changed", "files_removed", "documents_new", "documents_removed", "rejects_new")


def night_data(root: Path, data: dict[str, str], since: float) -> dict[str, Any]:
    """What the night's data stages found and did, from the manifests behind `data` (a keywords or shuffle
    output): the corpus folder's delta since its previous build (files and documents new, changed, removed;
    new rejects), and per stage whether it was built tonight (with the files read or reused, the shards
    computed or linked) or came from cache. The counts are the `promotions` row's columns."""
    stages, ref, found = [], data, {}
    while ref and ref_complete(root, ref):
        manifest = ref_manifest(root, ref)
        built = float(manifest.get("finished_at", 0)) >= since
        stages.append(f"{ref['stage']} {'built' if built else 'cached'}{_work(manifest) if built else ''}")
        if ref["stage"] == "ingest":
            found = manifest.get("delta") or {}
            if not built:  # the corpus is as the build this night reused left it: nothing came in
                found = dict.fromkeys(NIGHT_COUNTS, 0)
        ref = (manifest.get("upstream") or [None])[0]
    counts = {name: found.get(name) for name in NIGHT_COUNTS}
    return {**counts, "recomputed": "; ".join(reversed(stages))}


def _work(manifest: dict[str, Any]) -> str:
    if work := manifest.get("file_work"):
        return f" ({work['read']} files read, {work['reused']} reused)"
    if work := manifest.get("shard_work"):
        return f" ({work['computed']} shards computed, {work['linked']} linked)"
    return ""


def night_markdown(night: dict[str, Any]) -> list[str]:
    """The decision artifact's lines on what the night brought."""
    if all(night.get(name) is None for name in NIGHT_COUNTS):
        return ["", f"- data: {night.get('recomputed') or 'not built'}"]
    return [
        "",
        f"- corpus: {night['files_new']} new, {night['files_changed']} changed, {night['files_removed']} removed "
        f"files; {night['documents_new']} documents in, {night['documents_removed']} out; "
        f"{night['rejects_new']} new rejects",
        f"- data: {night['recomputed']}",
    ]


def decision_markdown(
    decision: str,
    reason: str,
    candidate: str,
    champion: str,
    metrics: dict,
    names: list,
    test: PairedTest | None = None,
    night: dict[str, Any] | None = None,
    gc: str | None = None,
) -> str:
    lines = [
        f"# nightly-retrain: **{decision}**",
        "",
        reason,
        "",
        f"- candidate: `{candidate}`",
        f"- champion: `{champion}`",
    ]
    if test is not None:
        lines.append(
            f"- primary gain {test.gain:+.4f}, {test.confidence:.0%} interval [{test.low:+.4f}, {test.high:+.4f}], "
            f"p = {test.p_value:.4f} (paired, {test.n} queries)"
        )
    if night:
        lines += night_markdown(night)
    if gc:
        lines.append(f"- retention: {gc}")
    if names:
        lines += ["", "| metric | candidate | champion |", "|---|---|---|"]
        cand, champ = metrics.get(candidate, {}), metrics.get(champion, {})
        for name in names:
            fmt = lambda v: "-" if v is None else f"{v:.4f}"  # noqa: E731
            lines.append(f"| {name} | {fmt(cand.get(name))} | {fmt(champ.get(name))} |")
    return "\n".join(lines) + "\n"


def publish(markdown: str) -> None:
    """The decision as the `nightly-decision` artifact; one that fails to publish is a warning, never a failed
    decision."""

    def make() -> None:
        prefect.artifacts.create_markdown_artifact(
            markdown, key="nightly-decision", description="nightly-retrain decision"
        )

    publish_or_warn(make, "nightly-decision")
