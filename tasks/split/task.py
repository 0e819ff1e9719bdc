"""The `split` Prefect task: `documents` -> `sentences`, one output shard per input shard."""

from __future__ import annotations

from prefect import task

from storage.fingerprint import fingerprint
from storage.progress import Progress, current_logger
from storage.shards import finished_shards, sum_shard_stats
from storage.stage_output import StageOutput, ref_dir, ref_manifest
from tasks.runtime.map_shards import map_shards
from tasks.runtime.stage_cache import STAGE_TASK
from tasks.split.sentences import SPLIT_CODE_VERSION, SplitConfig, split_all, split_shard


@task(name="split", **STAGE_TASK)
def split(
    documents: dict[str, str], config: SplitConfig, root: str, workers: int = 0, dask: str = ""
) -> dict[str, str]:
    """Split every document shard into sentences on all cores (`workers=0`: one per core), or as
    mapped tasks on the Dask scheduler at `dask`."""
    logger = current_logger(__name__)
    fp = fingerprint("split", SPLIT_CODE_VERSION, config, [documents["fingerprint"]])
    out = StageOutput.open(root, "split", fp, log=logger)
    if out.complete:
        return out.cached()
    shards = finished_shards(ref_dir(out.root, documents))
    logger.info("split: %d document shards -> %s", len(shards), out.dir)
    total = ref_manifest(out.root, documents)["rows"].get("documents")
    done = sum_shard_stats(out.dir).get("documents", 0)  # shards a killed run finished
    with Progress("split", total, logger, unit="documents", done=done, heartbeat=True) as progress:
        if dask:
            on_shard = lambda stats: progress.update(stats.get("documents", 0))  # noqa: E731
            map_shards(split_shard, shards, out.dir, config, on_shard=on_shard, dask=dask)
        else:
            split_all(shards, out.dir, config, workers=workers or None, on_progress=progress.update)
    stats = sum_shard_stats(out.dir)
    progress.close(sentences=stats.get("sentences", 0))
    return out.finish(
        code_version=SPLIT_CODE_VERSION,
        config=config,
        inputs={"documents": documents["path"]},
        upstream=[documents],
        tables={"sentences": "part-*.parquet"},
        rows={"documents": stats.get("documents", 0), "sentences": stats.get("sentences", 0)},
        drops={k: v for k, v in stats.items() if k not in ("documents", "sentences")},
    )
