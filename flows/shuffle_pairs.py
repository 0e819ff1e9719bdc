"""The `shuffle-pairs` flow: the two-phase shuffle as mapped tasks, for Dask/Ray task runners.

`build-pairs` runs the single-machine `shuffle` task; this flow writes the same stage folder
with the same bytes when partitions should be sorted on different workers, e.g.
`shuffle_pairs.with_options(task_runner=DaskTaskRunner(address=...))(pairs, config)`.
"""

from __future__ import annotations

from prefect import flow, unmapped

from storage.layout import data_root
from tasks.catalog_task import update_catalog
from tasks.shuffle_distributed_tasks import partition_pairs, plan_shuffle, sort_pairs_partition, write_shards
from tasks.shuffle_pairs import ShuffleConfig


@flow(name="shuffle-pairs")
def shuffle_pairs(pairs: dict[str, str], config: ShuffleConfig | None = None, root: str | None = None) -> dict:
    config = config or ShuffleConfig()
    base = str(data_root(root))
    plan = plan_shuffle(pairs, config, base)
    if plan["complete"]:
        return plan["ref"]
    parted = partition_pairs.map(unmapped(plan), range(len(plan["inputs"])), unmapped(config), unmapped(base))
    parts = sort_pairs_partition.map(
        unmapped(plan), range(plan["partitions"]), unmapped(config), unmapped(base), wait_for=[parted]
    )
    ref = write_shards(plan, pairs, config, base, wait_for=[parts])
    update_catalog(base, [pairs, ref])
    return ref
