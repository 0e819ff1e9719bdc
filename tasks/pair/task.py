"""The `pair` Prefect task: `sentences` -> `pairs` (GUR's LCS-filtered sentence pairs)."""

from __future__ import annotations

from prefect import task

from storage.progress import current_logger
from tasks.pair.candidates import PairConfig
from tasks.pair.shards import pair_shard
from tasks.pair.table import PAIR_CODE_VERSION
from tasks.runtime.parameters import RunOptions
from tasks.runtime.shard_stage import ShardStage, run_shard_stage
from tasks.runtime.stage_cache import STAGE_TASK

PAIR = ShardStage(
    name="pair",
    code_version=PAIR_CODE_VERSION,
    worker=pair_shard,
    counted="sentences",
    output="pairs",
    row_counts=(
        "documents",
        "sentences",
        "pairs",
        "title_pairs",
        "content_pairs",
        "short_pairs",
        "candidates_checked",
    ),
    describe=lambda config: f"rule={config.rule}",
)


@task(name="pair", **STAGE_TASK)
def pair(
    sentences: dict[str, str], config: PairConfig, root: str, workers: int = 0, dask: str = RunOptions.dask
) -> dict[str, str]:
    """Mine pairs in every sentences shard on all cores (`workers=0`: one per core), or as mapped
    tasks on the Dask scheduler at `dask`; a shard whose bytes an earlier run paired is linked."""
    return run_shard_stage(PAIR, sentences, config, root, workers, dask, current_logger(__name__))
