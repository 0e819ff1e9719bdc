"""The pair stage's per-shard worker: one sentences shard in, one pairs shard out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

from storage.shards import write_shard, write_shard_stats
from tasks.pair_candidates import PairConfig
from tasks.pair_sentences import pair_table


def pair_shard(in_path: str, out_dir: str, index: int, config: PairConfig) -> dict[str, int]:
    """Documents never straddle shards (split writes shard i from documents shard i)."""
    sentences = pq.read_table(in_path, columns=["doc_id", "sent_id", "is_title", "text", "norm"])
    pairs, counts = pair_table(sentences, config)
    write_shard_stats(Path(out_dir), index, counts)
    write_shard(Path(out_dir), index, pairs)
    return counts


def pair_all(
    in_shards: list[Path],
    out_dir: Path,
    config: PairConfig,
    workers: int | None = None,
    on_shard: Callable[[dict[str, int]], None] | None = None,
) -> None:
    from tasks.map_shards import map_shards

    map_shards(pair_shard, in_shards, out_dir, config, workers, on_shard)
