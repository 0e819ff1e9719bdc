"""The `shuffle-pairs` flow: the two-phase shuffle as mapped tasks, for Dask/Ray task runners.

`build-pairs` runs the single-machine `shuffle` task, or this flow on its Dask cluster when given
`dask` (`shuffle_on_dask`); both write the same stage folder with the same bytes. Standalone:
`shuffle_pairs.with_options(task_runner=DaskTaskRunner(address=...))(pairs, config)`.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, unmapped

from storage.layout import data_root
from tasks.runtime.catalog import catalog_at_end
from tasks.runtime.dask_cluster import wait_logging
from tasks.shuffle.phases import ShuffleConfig
from tasks.shuffle.task import partition_pairs, plan_shuffle, sort_pairs_partition, write_shards


@flow(name="shuffle-pairs")
def shuffle_pairs(
    pairs: dict[str, str], config: ShuffleConfig | None = None, root: str | None = None, catalog: bool = True
) -> dict:
    config = config or ShuffleConfig()
    base = str(data_root(root))
    plan = plan_shuffle(pairs, config, base)
    if plan["complete"]:
        return plan["ref"]
    parted = partition_pairs.map(unmapped(plan), range(len(plan["inputs"])), unmapped(config), unmapped(base))
    wait_logging(parted, "shuffle: input shards partitioned")
    parts = sort_pairs_partition.map(unmapped(plan), range(plan["partitions"]), unmapped(config), unmapped(base))
    wait_logging(parts, "shuffle: partitions sorted")
    ref = write_shards(plan, pairs, config, base)
    if catalog:
        catalog_at_end(base, [pairs, ref])
    return ref


def shuffle_on_dask(pairs: dict[str, str], config: ShuffleConfig, root: Path, address: str) -> dict[str, str]:
    """The shuffle stage as a `shuffle-pairs` subflow on the Dask scheduler at `address` (no catalog update:
    the calling flow does that)."""
    from prefect_dask import DaskTaskRunner

    runner = DaskTaskRunner(address=address)
    return shuffle_pairs.with_options(task_runner=runner)(pairs, config, str(root), catalog=False)
