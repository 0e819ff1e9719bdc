"""The pair stage's per-shard worker: one sentences shard in, one pairs shard out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage.shards import write_shard, write_shard_stats
from tasks.eval_data import is_held_out
from tasks.pair_candidates import PairConfig
from tasks.pair_sentences import pair_table


def drop_held_out(sentences: pa.Table, percent: int) -> tuple[pa.Table, int]:
    """Remove documents whose title is in the evaluation hold-out, so no model trains on them.

    The rule is the one the demo retrieval set uses (`is_held_out` on the title), so pairs never
    leak the held-out articles into training. Documents without a title row are kept.
    """
    if percent <= 0:
        return sentences, 0
    titles = sentences.filter(sentences["is_title"])
    held = {
        d
        for d, t in zip(titles["doc_id"].to_pylist(), titles["text"].to_pylist(), strict=True)
        if is_held_out(t, percent)
    }
    if not held:
        return sentences, 0
    keep = pc.invert(pc.is_in(sentences["doc_id"], value_set=pa.array(sorted(held), sentences["doc_id"].type)))
    return sentences.filter(keep), len(held)


def pair_shard(in_path: str, out_dir: str, index: int, config: PairConfig) -> dict[str, int]:
    """Documents never straddle shards (split writes shard i from documents shard i)."""
    sentences = pq.read_table(in_path, columns=["doc_id", "sent_id", "is_title", "text", "norm"])
    sentences, held_out = drop_held_out(sentences, config.holdout_percent)
    pairs, counts = pair_table(sentences, config)
    if config.holdout_percent:
        counts = {**counts, "held_out_for_evaluation": held_out}
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
