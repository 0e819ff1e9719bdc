"""The shuffle stage's Prefect tasks: `pairs` -> deduplicated, globally shuffled `short/` and `long/` shards.

`shuffle` runs the whole stage on this machine. `plan_shuffle`, `partition_pairs`, `sort_pairs_partition` and
`write_shards` are the same phases as mapped tasks, for a Dask or Ray task runner spanning machines (the
`shuffle-pairs` flow): each is idempotent through the same markers as `shuffle` and gives the same bytes. The data
root must then be on storage every worker sees.
"""

from __future__ import annotations

import shutil
import time

from prefect import task
from prefect.cache_policies import NO_CACHE

from storage.fingerprint import fingerprint
from storage.layout import data_root
from storage.progress import Progress, current_logger
from storage.shards import finished_shards, sweep_temporaries
from storage.stage_output import StageOutput, ref_dir
from tasks.runtime.stage_cache import STAGE_TASK
from tasks.shuffle.phases import (
    BUCKETS,
    SHUFFLE_CODE_VERSION,
    WORK_DIR,
    ShuffleConfig,
    check_disk,
    disk_needed,
    partition_shard,
    partitions_for,
    shard_schema,
    shuffle_all,
    sort_partition,
    sorted_stats,
    uncompressed_bytes,
    write_bucket_shards,
)


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


# The same stage as mapped phases (the `shuffle-pairs` flow).


@task(name="plan-shuffle", cache_policy=NO_CACHE)
def plan_shuffle(pairs: dict[str, str], config: ShuffleConfig, root: str) -> dict:
    """Fingerprint, input shards and partition count; `complete` when the stage already exists."""
    fp = shuffle_fingerprint(pairs, config)
    out = StageOutput.open(root, "shuffle", fp, exclude=(WORK_DIR,), log=current_logger(__name__))
    base = out.root
    shards = [str(p.relative_to(base)) for p in finished_shards(ref_dir(base, pairs))]
    input_bytes = uncompressed_bytes([base / s for s in shards])
    partitions = partitions_for(input_bytes, config) if shards else 1
    if not out.complete:
        sweep_temporaries(out.dir)
        # The partitioned and the sorted intermediates coexist here.
        check_disk(out.dir, disk_needed(input_bytes, config, intermediate_copies=2))
    return {
        "ref": out.ref,
        "complete": out.complete,
        "rebuilt": out.rebuilt,
        "inputs": shards,
        "partitions": partitions,
        "started": time.time(),
    }


@task(name="partition-pairs", cache_policy=NO_CACHE)
def partition_pairs(plan: dict, index: int, config: ShuffleConfig, root: str) -> int:
    base = data_root(root)
    out = base / plan["ref"]["path"]
    return partition_shard(base / plan["inputs"][index], index, out / WORK_DIR, config, plan["partitions"])


@task(name="sort-partition", cache_policy=NO_CACHE)
def sort_pairs_partition(plan: dict, p: int, config: ShuffleConfig, root: str) -> dict[str, int]:
    base = data_root(root)
    out = base / plan["ref"]["path"]
    return sort_partition(p, out / WORK_DIR, config, plan["partitions"])


@task(name="write-shards", cache_policy=NO_CACHE)
def write_shards(plan: dict, pairs: dict[str, str], config: ShuffleConfig, root: str) -> dict[str, str]:
    base = data_root(root)
    out = base / plan["ref"]["path"]
    stats: dict[str, float] = {"partitions": plan["partitions"], **sorted_stats(out / WORK_DIR, plan["partitions"])}
    schema = shard_schema([base / s for s in plan["inputs"]])
    stats.update(write_bucket_shards(out / WORK_DIR, out, plan["partitions"], config, schema))
    fp = plan["ref"]["fingerprint"]
    stage = StageOutput(base, "shuffle", fp, exclude=(WORK_DIR,), rebuilt=plan["rebuilt"], started_at=plan["started"])
    return complete_shuffle(stage, pairs, config, stats)
