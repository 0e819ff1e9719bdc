"""The shuffle stage as mapped Prefect tasks, for a Dask or Ray task runner spanning machines.

Several tasks in one module because they are the phases of one stage and share its plan;
each is idempotent through the same markers as the single-machine `shuffle` task and gives
the same bytes. The data root must be on storage every worker sees.
"""

from __future__ import annotations

import time

from prefect import task
from prefect.cache_policies import NO_CACHE

from storage.layout import data_root
from storage.progress import current_logger
from storage.shards import finished_shards, sweep_temporaries
from storage.stage_output import StageOutput, ref_dir
from tasks.shuffle_pairs import (
    WORK_DIR,
    ShuffleConfig,
    check_disk,
    disk_needed,
    partition_shard,
    partitions_for,
    shard_schema,
    sort_partition,
    sorted_stats,
    uncompressed_bytes,
    write_bucket_shards,
)
from tasks.shuffle_task import complete_shuffle, shuffle_fingerprint


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
