"""The `embed` Prefect task: a documents (or sentences) output and a model -> an `embeddings` output.

    fp = fingerprint("embed", version, config.key(), [documents fingerprint])
    for each documents shard: link the vectors an earlier output made from the same bytes with the
        same model, or embed it (`tasks/embed/vectors.py: embed_shard`), marker last
    manifest: rows, shard_inputs (each input shard's SHA-256), shard_work (computed / linked)

A corpus folder's documents output holds one shard per file (`tasks/ingest/folder.py`), linked from
the file's ingest unit, so its SHA-256 names the unit: a night with one new file embeds that file's
shard and links the rest; a new model (a new fingerprint) embeds everything once. A killed run keeps
its finished shards and redoes the one it was in.

Where the shards run: in this process, torch's threads on every core (the fastest on an idle
machine: processes each load the model and the last shards leave cores idle); with `workers` > 1 and
enough pending texts (TEXTS_PER_WORKER each), in that many worker processes with one share of the
cores each (on cores other jobs keep busy, threads wait on each other and processes do not); with
`dask`, as Prefect tasks on that cluster (one thread per worker). The thread count is in no
fingerprint: the bytes are the same.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from prefect import task

from storage.fingerprint import fingerprint
from storage.layout import data_root, record_path
from storage.progress import Progress, current_logger
from storage.shards import finished_shards, sum_shard_stats
from storage.stage_output import StageOutput, ref_dir, ref_manifest, stage_ref
from tasks.embed.index import EXACT_MAX, INDEX_STAGE, HnswConfig, build_index_output, read_vectors
from tasks.embed.vectors import EMBED_CODE_VERSION, EmbedConfig, embed_shard
from tasks.runtime.map_shards import map_shards
from tasks.runtime.shard_stage import input_hashes, link_reusable, reusable_shards
from tasks.runtime.stage_cache import STAGE_TASK

STAGE = "embed"
# Pending texts that pay for a worker process: several times the texts its start-up (imports, the model) would
# embed on one core (the results log: docs/results/, the embed stage in bfloat16, at batch 32 and in worker
# processes).
TEXTS_PER_WORKER = 400
TABLES = {"documents": "embeddings", "sentences": "sentence_embeddings"}
INPUT_STAGE = {"documents": "ingest", "sentences": "split"}


def embed_fingerprint(upstream: dict[str, str], config: EmbedConfig) -> str:
    return fingerprint(STAGE, EMBED_CODE_VERSION, config.key(), [upstream["fingerprint"]])


def embed_workers(requested: int, shards: int, texts: int) -> int:
    """Worker processes for `texts` pending texts in `shards` shards: `requested` (0: this process alone, with
    torch's threads on every core, the fastest on an idle machine), at most one a shard and one per
    TEXTS_PER_WORKER texts; 1 means this process."""
    return max(1, min(requested or 1, shards, texts // TEXTS_PER_WORKER))


def embed_stage(
    upstream: dict[str, str],
    config: EmbedConfig,
    root: str | Path,
    logger: logging.Logger | None = None,
    workers: int = 1,
    dask: str = "",
) -> tuple[dict[str, str], bool]:
    """The task body, callable without Prefect: (the output's reference, whether it was complete already).
    `workers`: processes on this machine (0 or 1: this one); `dask`: a scheduler address."""
    logger = logger or logging.getLogger(__name__)
    if upstream["stage"] != INPUT_STAGE[config.unit]:
        raise ValueError(f"embed {config.unit}: needs a {INPUT_STAGE[config.unit]} output, got {upstream['path']}")
    out = StageOutput.open(root, STAGE, embed_fingerprint(upstream, config), log=logger)
    if out.complete:
        return out.ref, True
    upstream_dir, upstream_manifest = ref_dir(out.root, upstream), ref_manifest(out.root, upstream)
    shards = finished_shards(upstream_dir)
    hashes = input_hashes(upstream_manifest, upstream_dir, shards)
    config_key = fingerprint(STAGE, EMBED_CODE_VERSION, config.key())
    linked = link_reusable(out.dir, hashes, reusable_shards(out.root, STAGE, config_key, hashes))
    logger.info(
        "embed: %d %s shards (%d already embedded from the same bytes by this model) with %s -> %s",
        len(shards),
        config.unit,
        linked,
        config.model_path,
        out.dir,
    )
    total = upstream_manifest["rows"].get(config.unit)
    done = sum_shard_stats(out.dir).get(config.unit, 0)  # linked, or finished by a killed run
    stats = embed_pending(shards, out.dir, config, total, done, workers, dask, logger)
    ref = out.finish(
        code_version=EMBED_CODE_VERSION,
        config={**config.key(), "model_path": record_path(out.root, config.model_path)},
        inputs={config.unit: upstream["path"], "model": record_path(out.root, config.model_path)},
        upstream=[upstream],
        tables={TABLES[config.unit]: "part-*.parquet"},
        rows={config.unit: stats.get(config.unit, 0), "embeddings": stats.get("embeddings", 0)},
        drops={k: v for k, v in stats.items() if k not in (config.unit, "embeddings")},
        extra={
            "config_key": config_key,
            "shard_inputs": hashes,
            "shard_work": {"computed": len(shards) - linked, "linked": linked},
            "embedded_now": stats.get(config.unit, 0) - done,  # texts through the model in this run
        },
    )
    return ref, False


def embed_pending(
    shards: list[Path],
    out_dir: Path,
    config: EmbedConfig,
    total: int | None,
    done: int,
    workers: int,
    dask: str,
    logger: logging.Logger,
) -> dict[str, int]:
    """Embed the shards `out_dir` does not hold yet (in this process, in worker processes or on `dask`), with
    progress from the `done` texts on; returns the summed counts of every shard in `out_dir`."""
    pending = len(shards) - len(finished_shards(out_dir))
    n = 1 if dask else embed_workers(workers, pending, (total or 0) - done)
    if n > 1:
        config = replace(config, threads=max(1, (os.cpu_count() or 1) // n))
        logger.info("embed: %d worker processes, %d thread(s) each", n, config.threads)
    with Progress("embed", total, logger, unit=config.unit, done=done, heartbeat=True) as progress:
        on_shard = (lambda stats: progress.update(stats.get(config.unit, 0))) if dask else None
        map_shards(
            embed_shard,
            shards,
            out_dir,
            config,
            workers=n,
            on_progress=None if dask else progress.update,
            on_shard=on_shard,
            dask=dask,
            min_bytes_per_worker=0,
        )
    stats = sum_shard_stats(out_dir)
    progress.close(embeddings=stats.get("embeddings", 0))
    return stats


@task(name="embed", **STAGE_TASK)
def embed(
    upstream: dict[str, str], config: EmbedConfig, root: str, workers: int = 0, dask: str = ""
) -> dict[str, Any]:
    """Embed every shard no earlier output embedded from the same bytes with the same model; reuse a complete
    output as is (a `Cached` state)."""
    ref, cached = embed_stage(upstream, config, root, current_logger(__name__), workers=workers, dask=dask)
    if cached:
        from prefect.states import Completed

        return Completed(data=ref, name="Cached", message=f"reused {ref['path']}")
    return ref


@task(name="embed-index", **STAGE_TASK)
def embed_index(embeddings: dict[str, str], root: str, exact_max: int = EXACT_MAX) -> dict[str, str] | None:
    """The HNSW index of an embeddings output above `exact_max` rows (built once, a stage output of its own);
    None at or below it, where search is exact."""
    base = data_root(root)
    rows = ref_manifest(base, embeddings)["rows"].get("embeddings", 0)
    if rows <= exact_max:
        return None
    vectors = read_vectors(sorted(ref_dir(base, embeddings).glob("part-*.parquet")))
    path = build_index_output(base, embeddings, vectors, HnswConfig(), current_logger(__name__))
    return stage_ref(INDEX_STAGE, path.parent.name)
