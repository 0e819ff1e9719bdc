"""The `pair` Prefect task: `sentences` -> `pairs` (GUR's LCS-filtered sentence pairs)."""

from __future__ import annotations

import time

from prefect import task

from storage.fingerprint import fingerprint
from storage.layout import data_root, stage_dir
from storage.manifest import is_complete, write_manifest
from storage.shards import finished_shards, sum_shard_stats
from storage.stage_output import build_manifest, ref_dir, stage_ref
from tasks.pair_candidates import PairConfig
from tasks.pair_sentences import PAIR_CODE_VERSION
from tasks.pair_shards import pair_all
from tasks.progress import Progress, current_logger
from tasks.stage_cache import stage_cache_policy

_ROW_COUNTS = ("documents", "sentences", "pairs", "title_pairs", "content_pairs", "short_pairs", "candidates_checked")


@task(name="pair", cache_policy=stage_cache_policy(PAIR_CODE_VERSION))
def pair(sentences: dict[str, str], config: PairConfig, root: str, workers: int = 0) -> dict[str, str]:
    """Mine pairs in every sentences shard on all cores (`workers=0`: one per core)."""
    started = time.time()
    base = data_root(root)
    fp = fingerprint("pair", PAIR_CODE_VERSION, config, [sentences["fingerprint"]])
    out = stage_dir(base, "pair", fp)
    logger = current_logger(__name__)
    if is_complete(out):
        logger.info("pair: reusing complete output %s", out)
        return stage_ref("pair", fp)
    shards = finished_shards(ref_dir(base, sentences))
    logger.info("pair: %d sentence shards, rule=%s -> %s", len(shards), config.rule, out)
    progress = Progress("pair shards", len(shards), logger)
    pair_all(shards, out, config, workers=workers or None, on_shard=lambda stats: progress.update(1))
    stats = sum_shard_stats(out)
    progress.close(pairs=stats.get("pairs", 0))
    write_manifest(
        out,
        build_manifest(
            stage="pair",
            fingerprint=fp,
            code_version=PAIR_CODE_VERSION,
            config=config,
            inputs={"sentences": sentences["path"]},
            upstream=[sentences],
            tables={"pairs": "part-*.parquet"},
            rows={k: stats.get(k, 0) for k in _ROW_COUNTS},
            drops={k: v for k, v in stats.items() if k not in _ROW_COUNTS},
            started_at=started,
        ),
    )
    return stage_ref("pair", fp)
