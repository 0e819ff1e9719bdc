"""The `split` Prefect task: `documents` -> `sentences`, one output shard per input shard."""

from __future__ import annotations

import time

from prefect import task

from storage.fingerprint import fingerprint
from storage.layout import data_root, stage_dir
from storage.manifest import is_complete, write_manifest
from storage.shards import finished_shards, sum_shard_stats
from storage.stage_output import build_manifest, ref_dir, stage_ref
from tasks.progress import Progress, current_logger
from tasks.split_sentences import SPLIT_CODE_VERSION, SplitConfig, split_all
from tasks.stage_cache import stage_cache_policy


@task(name="split", cache_policy=stage_cache_policy(SPLIT_CODE_VERSION))
def split(documents: dict[str, str], config: SplitConfig, root: str, workers: int = 0) -> dict[str, str]:
    """Split every document shard into sentences on all cores (`workers=0`: one per core)."""
    started = time.time()
    base = data_root(root)
    fp = fingerprint("split", SPLIT_CODE_VERSION, config, [documents["fingerprint"]])
    out = stage_dir(base, "split", fp)
    logger = current_logger(__name__)
    if is_complete(out):
        logger.info("split: reusing complete output %s", out)
        return stage_ref("split", fp)
    shards = finished_shards(ref_dir(base, documents))
    logger.info("split: %d document shards -> %s", len(shards), out)
    progress = Progress("split shards", len(shards), logger)
    split_all(shards, out, config, workers=workers or None, on_shard=lambda stats: progress.update(1))
    stats = sum_shard_stats(out)
    progress.close(sentences=stats.get("sentences", 0))
    write_manifest(
        out,
        build_manifest(
            stage="split",
            fingerprint=fp,
            code_version=SPLIT_CODE_VERSION,
            config=config,
            inputs={"documents": documents["path"]},
            upstream=[documents],
            tables={"sentences": "part-*.parquet"},
            rows={"documents": stats.get("documents", 0), "sentences": stats.get("sentences", 0)},
            drops={k: v for k, v in stats.items() if k not in ("documents", "sentences")},
            started_at=started,
        ),
    )
    return stage_ref("split", fp)
