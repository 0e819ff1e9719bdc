"""The `pair` Prefect task: `sentences` -> `pairs` (GUR's LCS-filtered sentence pairs)."""

from __future__ import annotations

from prefect import task

from storage.fingerprint import fingerprint
from storage.progress import Progress, current_logger
from storage.shards import finished_shards, sum_shard_stats
from storage.stage_output import StageOutput, ref_dir, ref_manifest
from tasks.pair.candidates import PairConfig
from tasks.pair.shards import pair_all, pair_shard
from tasks.pair.table import PAIR_CODE_VERSION
from tasks.runtime.map_shards import map_shards
from tasks.runtime.stage_cache import STAGE_TASK

_ROW_COUNTS = ("documents", "sentences", "pairs", "title_pairs", "content_pairs", "short_pairs", "candidates_checked")


@task(name="pair", **STAGE_TASK)
def pair(sentences: dict[str, str], config: PairConfig, root: str, workers: int = 0, dask: str = "") -> dict[str, str]:
    """Mine pairs in every sentences shard on all cores (`workers=0`: one per core), or as mapped
    tasks on the Dask scheduler at `dask`."""
    logger = current_logger(__name__)
    fp = fingerprint("pair", PAIR_CODE_VERSION, config, [sentences["fingerprint"]])
    out = StageOutput.open(root, "pair", fp, log=logger)
    if out.complete:
        return out.cached()
    shards = finished_shards(ref_dir(out.root, sentences))
    logger.info("pair: %d sentence shards, rule=%s -> %s", len(shards), config.rule, out.dir)
    total = ref_manifest(out.root, sentences)["rows"].get("sentences")
    done = sum_shard_stats(out.dir).get("sentences", 0)  # shards a killed run finished
    with Progress("pair", total, logger, unit="sentences", done=done, heartbeat=True) as progress:
        if dask:
            on_shard = lambda stats: progress.update(stats.get("sentences", 0))  # noqa: E731
            map_shards(pair_shard, shards, out.dir, config, on_shard=on_shard, dask=dask)
        else:
            pair_all(shards, out.dir, config, workers=workers or None, on_progress=progress.update)
    stats = sum_shard_stats(out.dir)
    progress.close(pairs=stats.get("pairs", 0))
    return out.finish(
        code_version=PAIR_CODE_VERSION,
        config=config,
        inputs={"sentences": sentences["path"]},
        upstream=[sentences],
        tables={"pairs": "part-*.parquet"},
        rows={k: stats.get(k, 0) for k in _ROW_COUNTS},
        drops={k: v for k, v in stats.items() if k not in _ROW_COUNTS},
    )
