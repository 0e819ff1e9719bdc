"""The `shuffle` Prefect task: `pairs` -> deduplicated, globally shuffled `short/` and `long/` shards."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from prefect import task

from storage.fingerprint import fingerprint
from storage.layout import data_root, stage_dir
from storage.manifest import is_complete, write_manifest
from storage.shards import finished_shards
from storage.stage_output import build_manifest, ref_dir, stage_ref
from tasks.progress import current_logger
from tasks.shuffle_pairs import BUCKETS, SHUFFLE_CODE_VERSION, WORK_DIR, ShuffleConfig, shuffle_all
from tasks.stage_cache import stage_cache_policy


def shuffle_fingerprint(pairs: dict[str, str], config: ShuffleConfig) -> str:
    return fingerprint("shuffle", SHUFFLE_CODE_VERSION, config.output_fields(), [pairs["fingerprint"]])


def complete_shuffle(out: Path, fp: str, pairs: dict[str, str], config: ShuffleConfig, stats, started):
    """Write the manifest (last), then drop the intermediate partitions."""
    rows = {f"rows_{b}": int(stats.get(f"rows_{b}", 0)) for b in BUCKETS}
    drops = {k: int(stats.get(k, 0)) for k in ("duplicate_same_document", "duplicate_across_documents")}
    write_manifest(
        out,
        build_manifest(
            stage="shuffle",
            fingerprint=fp,
            code_version=SHUFFLE_CODE_VERSION,
            config=config,
            inputs={"pairs": pairs["path"]},
            upstream=[pairs],
            tables={"shards": "*/part-*.parquet"} | {f"shards_{b}": f"{b}/part-*.parquet" for b in BUCKETS},
            rows={"pairs_in": int(stats.get("rows_in", 0)), "rows_out": int(stats.get("rows_out", 0)), **rows},
            drops=drops,
            started_at=started,
            extra={
                "shards": {b: int(stats.get(f"shards_{b}", 0)) for b in BUCKETS},
                "partitions": int(stats.get("partitions", 1)),
                "false_negatives": {k: v for k, v in stats.items() if k.startswith("false_negative")},
            },
        ),
    )
    shutil.rmtree(out / WORK_DIR, ignore_errors=True)


@task(name="shuffle", cache_policy=stage_cache_policy(SHUFFLE_CODE_VERSION))
def shuffle(pairs: dict[str, str], config: ShuffleConfig, root: str) -> dict[str, str]:
    """Dedup and globally shuffle on this machine (partitions sorted one after another)."""
    started = time.time()
    base = data_root(root)
    fp = shuffle_fingerprint(pairs, config)
    out = stage_dir(base, "shuffle", fp)
    logger = current_logger(__name__)
    if is_complete(out):
        logger.info("shuffle: reusing complete output %s", out)
        return stage_ref("shuffle", fp)
    shards = finished_shards(ref_dir(base, pairs))
    logger.info(
        "shuffle: %d pair shards, seed=%d, memory_limit=%s -> %s", len(shards), config.seed, config.memory_limit, out
    )
    stats = shuffle_all(shards, out, config)
    logger.info(
        "shuffle: %d pairs in, %d out (%d short, %d long), %d partitions",
        stats.get("rows_in", 0),
        stats.get("rows_out", 0),
        stats.get("rows_short", 0),
        stats.get("rows_long", 0),
        stats["partitions"],
    )
    complete_shuffle(out, fp, pairs, config, stats, started)
    return stage_ref("shuffle", fp)
