"""A stage that maps shard `i` in to shard `i` out (split, pair), with each shard's work done once.

    SPLIT = ShardStage("split", SPLIT_CODE_VERSION, split_shard, counted="documents", output="sentences", ...)
    return run_shard_stage(SPLIT, documents, config, root, workers, dask, logger)

A shard's output depends only on that input shard's bytes and the stage's config, so it is
looked up by both: every output records the SHA-256 of the input shard behind each of its
shards (`shard_inputs`, from the upstream manifest's inventory), and a new output of the same
stage and config links an earlier output's shard instead of recomputing it when the input
bytes match. A corpus folder that grew by one file has one new documents shard (see
`tasks/ingest/folder.py`), so a night splits and pairs only that shard; the output is the
same bytes as a cold build, shard for shard.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storage.fingerprint import fingerprint
from storage.progress import Progress
from storage.shards import finished_shards, link_shard, shard_done, sum_shard_stats
from storage.stage_output import StageOutput, ref_dir, ref_manifest
from tasks.runtime.map_shards import Worker, map_shards


@dataclass(frozen=True)
class ShardStage:
    """What differs between shard-to-shard stages: names, the worker and which counts are rows."""

    name: str  # the stage folder, e.g. "split"
    code_version: str
    worker: Worker  # worker(in_path, out_dir, index, config, report=None) -> the shard's counts
    counted: str  # the input unit progress counts (the upstream manifest's row of the same name)
    output: str  # the table the stage writes (`part-*.parquet`), and the count the closing line shows
    row_counts: tuple[str, ...]  # counts that are rows; every other count is a drop reason
    describe: Callable[[Any], str] = lambda config: ""  # what the start line adds, e.g. "rule=weighted"


def input_hashes(manifest: dict[str, Any], base: Path, shards: list[Path]) -> list[str | None]:
    """Each input shard's SHA-256 as its stage's manifest recorded it (None when not listed)."""
    listed = manifest.get("files") or {}
    return [(listed.get(shard.relative_to(base).as_posix()) or {}).get("sha256") for shard in shards]


def reusable_shards(
    root: Path, stage: str, config_key: str, wanted: Iterable[str | None] | None = None
) -> dict[str, tuple[Path, int]]:
    """Input SHA-256 -> (output folder, shard index) over every complete output of `stage` made with the
    same code and config (`config_key`), the newest output that has it. `wanted`: only these inputs (a
    night asks for one folder's shards; every kept output lists all of its own)."""
    from storage.manifest_index import complete_manifests

    wanted = None if wanted is None else set(wanted)
    found: list[tuple[float, Path, dict]] = []
    for folder, manifest in complete_manifests(root, stage).items():  # the index: no inventory parsed
        if manifest.get("config_key") == config_key and manifest.get("shard_inputs"):
            found.append((float(manifest.get("finished_at", 0.0)), folder, manifest["shard_inputs"]))
    index: dict[str, tuple[Path, int]] = {}
    for _, folder, inputs in sorted(found, key=lambda item: (item[0], item[1].name), reverse=True):
        for i, sha in enumerate(inputs):
            if sha is None or sha in index or (wanted is not None and sha not in wanted):
                continue
            if shard_done(folder, i):
                index[sha] = (folder, i)
    return index


def link_reusable(out_dir: Path, hashes: list[str | None], index: dict[str, tuple[Path, int]]) -> int:
    """Link every not-yet-done shard whose input bytes an earlier output already processed; returns how many."""
    linked = 0
    for i, sha in enumerate(hashes):
        if sha is None or shard_done(out_dir, i) or sha not in index:
            continue
        folder, source_index = index[sha]
        link_shard(folder, source_index, out_dir, i)
        linked += 1
    return linked


def run_shard_stage(
    stage: ShardStage,
    upstream: dict[str, str],
    config: Any,
    root: str,
    workers: int,
    dask: str,
    logger: logging.Logger,
):
    """The whole task body: reuse the output, else link what earlier outputs hold and compute the rest on
    all cores (`workers=0`: one per core) or as mapped tasks on the Dask scheduler at `dask`."""
    fp = fingerprint(stage.name, stage.code_version, config, [upstream["fingerprint"]])
    out = StageOutput.open(root, stage.name, fp, log=logger)
    if out.complete:
        return out.cached()
    upstream_dir, upstream_manifest = ref_dir(out.root, upstream), ref_manifest(out.root, upstream)
    shards = finished_shards(upstream_dir)
    hashes = input_hashes(upstream_manifest, upstream_dir, shards)
    config_key = fingerprint(stage.name, stage.code_version, config)
    linked = link_reusable(out.dir, hashes, reusable_shards(out.root, stage.name, config_key, hashes))
    described = stage.describe(config)
    extra = f", {described}" if described else ""
    logger.info(
        "%s: %d %s shards (%d already made from the same bytes%s) -> %s",
        stage.name,
        len(shards),
        {"ingest": "document", "split": "sentence"}.get(upstream["stage"], upstream["stage"]),
        linked,
        extra,
        out.dir,
    )
    total = upstream_manifest["rows"].get(stage.counted)
    done = sum_shard_stats(out.dir).get(stage.counted, 0)  # shards linked here or finished by a killed run
    with Progress(stage.name, total, logger, unit=stage.counted, done=done, heartbeat=True) as progress:
        on_shard = lambda stats: progress.update(stats.get(stage.counted, 0))  # noqa: E731
        if dask:
            map_shards(stage.worker, shards, out.dir, config, on_shard=on_shard, dask=dask)
        else:
            map_shards(stage.worker, shards, out.dir, config, workers or None, on_progress=progress.update)
    stats = sum_shard_stats(out.dir)
    progress.close(**{stage.output: stats.get(stage.output, 0)})
    return out.finish(
        code_version=stage.code_version,
        config=config,
        inputs={upstream_table(upstream): upstream["path"]},
        upstream=[upstream],
        tables={stage.output: "part-*.parquet"},
        rows={k: stats.get(k, 0) for k in stage.row_counts},
        drops={k: v for k, v in stats.items() if k not in stage.row_counts},
        extra={
            "config_key": config_key,
            "shard_inputs": hashes,
            "shard_work": {"computed": len(shards) - linked, "linked": linked},
        },
    )


def upstream_table(upstream: dict[str, str]) -> str:
    """The table a stage reads from its upstream output (the manifest's `inputs` key)."""
    return {"ingest": "documents", "split": "sentences"}.get(upstream["stage"], upstream["stage"])
