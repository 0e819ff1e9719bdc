"""A stage's output folder: its reference (passed between tasks) and its manifest."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from storage.fingerprint import _plain
from storage.layout import stage_dir
from storage.manifest import is_complete, read_manifest


def stage_ref(stage: str, fingerprint: str) -> dict[str, str]:
    """What a stage task returns: small, JSON-able, no absolute paths (the data root may move)."""
    return {"stage": stage, "fingerprint": fingerprint, "path": f"{stage}/{fingerprint}"}


def ref_dir(root: Path, ref: dict[str, str]) -> Path:
    return stage_dir(root, ref["stage"], ref["fingerprint"])


def ref_complete(root: Path, ref: dict[str, str]) -> bool:
    return is_complete(ref_dir(root, ref))


def ref_manifest(root: Path, ref: dict[str, str]) -> dict[str, Any]:
    manifest = read_manifest(ref_dir(root, ref))
    if manifest is None:
        raise FileNotFoundError(f"stage output is not complete: {ref_dir(root, ref)}")
    return manifest


def build_manifest(
    *,
    stage: str,
    fingerprint: str,
    code_version: str,
    config: Any,
    inputs: Any,
    upstream: list[dict[str, str]],
    tables: dict[str, str],
    rows: dict[str, int],
    drops: dict[str, int],
    started_at: float,
    timings: dict[str, float] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest schema every stage shares; `tables` maps a catalog view name to a glob."""
    finished = time.time()
    manifest = {
        "stage": stage,
        "fingerprint": fingerprint,
        "code_version": code_version,
        "config": _plain(config),
        "inputs": _plain(inputs),
        "upstream": upstream,
        "tables": tables,
        "rows": rows,
        "drops": {k: v for k, v in sorted(drops.items())},
        "started_at": started_at,
        "finished_at": finished,
        "timings": {"total_s": round(finished - started_at, 3), **(timings or {})},
    }
    if extra:
        manifest.update(extra)
    return manifest
