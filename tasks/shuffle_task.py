"""The `shuffle` Prefect task: `pairs` -> deduplicated, globally shuffled `short/` and `long/` shards."""

from __future__ import annotations

import shutil

from prefect import task

from storage.fingerprint import fingerprint
from storage.progress import Progress, current_logger
from storage.shards import finished_shards
from storage.stage_output import StageOutput, ref_dir
from tasks.shuffle_pairs import BUCKETS, SHUFFLE_CODE_VERSION, WORK_DIR, ShuffleConfig, shuffle_all
from tasks.stage_cache import STAGE_TASK


def shuffle_fingerprint(pairs: dict[str, str], config: ShuffleConfig) -> str:
    return fingerprint("shuffle", SHUFFLE_CODE_VERSION, config.output_fields(), [pairs["fingerprint"]])


def complete_shuffle(out: StageOutput, pairs: dict[str, str], config: ShuffleConfig, stats) -> dict[str, str]:
    """Write the manifest (last), then drop the intermediate partitions."""
    rows = {f"rows_{b}": int(stats.get(f"rows_{b}", 0)) for b in BUCKETS}
    drops = {k: int(stats.get(k, 0)) for k in ("duplicate_same_document", "duplicate_across_documents")}
    ref = out.finish(
        code_version=SHUFFLE_CODE_VERSION,
        config=config,
        inputs={"pairs": pairs["path"]},
        upstream=[pairs],
        tables={"shards": "*/part-*.parquet"} | {f"shards_{b}": f"{b}/part-*.parquet" for b in BUCKETS},
        rows={"pairs_in": int(stats.get("rows_in", 0)), "rows_out": int(stats.get("rows_out", 0)), **rows},
        drops=drops,
        extra={
            "shards": {b: int(stats.get(f"shards_{b}", 0)) for b in BUCKETS},
            "partitions": int(stats.get("partitions", 1)),
            "false_negatives": {k: v for k, v in stats.items() if k.startswith("false_negative")},
        },
    )
    shutil.rmtree(out.dir / WORK_DIR, ignore_errors=True)
    return ref


@task(name="shuffle", **STAGE_TASK)
def shuffle(pairs: dict[str, str], config: ShuffleConfig, root: str) -> dict[str, str]:
    """Dedup and globally shuffle on this machine (partitions sorted one after another)."""
    logger = current_logger(__name__)
    out = StageOutput.open(root, "shuffle", shuffle_fingerprint(pairs, config), exclude=(WORK_DIR,), log=logger)
    if out.complete:
        return out.cached()
    shards = finished_shards(ref_dir(out.root, pairs))
    logger.info(
        "shuffle: %d pair shards, seed=%d, memory_limit=%s -> %s",
        len(shards),
        config.seed,
        config.memory_limit,
        out.dir,
    )
    with Progress("shuffle", None, logger, heartbeat=True):  # a line every 10 s, however long it sorts
        stats = shuffle_all(shards, out.dir, config)
    logger.info(
        "shuffle: %d pairs in, %d out (%d short, %d long), %d partitions",
        stats.get("rows_in", 0),
        stats.get("rows_out", 0),
        stats.get("rows_short", 0),
        stats.get("rows_long", 0),
        stats["partitions"],
    )
    return complete_shuffle(out, pairs, config, stats)
