"""The `split` Prefect task: `documents` -> `sentences`, one output shard per input shard."""

from __future__ import annotations

from prefect import task

from storage.progress import current_logger
from tasks.runtime.parameters import RunOptions
from tasks.runtime.shard_stage import ShardStage, run_shard_stage
from tasks.runtime.stage_cache import STAGE_TASK
from tasks.split.sentences import SPLIT_CODE_VERSION, SplitConfig, split_shard

SPLIT = ShardStage(
    name="split",
    code_version=SPLIT_CODE_VERSION,
    worker=split_shard,
    counted="documents",
    output="sentences",
    row_counts=("documents", "sentences"),
)


@task(name="split", **STAGE_TASK)
def split(
    documents: dict[str, str], config: SplitConfig, root: str, workers: int = 0, dask: str = RunOptions.dask
) -> dict[str, str]:
    """Split every document shard into sentences on all cores (`workers=0`: one per core), or as
    mapped tasks on the Dask scheduler at `dask`; a shard whose bytes an earlier run split is linked."""
    return run_shard_stage(SPLIT, documents, config, root, workers, dask, current_logger(__name__))
