"""The pair stage's per-shard worker: one sentences shard in, one pairs shard out.

A shard is paired a few thousand sentences (whole documents) at a time, reporting the sentences
done after each piece: one large shard (the demo's) would otherwise run for minutes without a
word. Documents are independent (every random choice is seeded per document), so the pieces'
pairs, concatenated, are the pairs of the whole shard, in the same order.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from storage.shards import read_shard, write_shard, write_shard_stats
from tasks.evaluate.data import is_held_out
from tasks.pair.candidates import PairConfig
from tasks.pair.table import _grouped, pair_table

PIECE_SENTENCES = 5000  # sentences per piece (whole documents; a longer document is a piece of its own)


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


def document_pieces(sentences: pa.Table, max_rows: int) -> list[pa.Table]:
    """Pieces of whole documents, about `max_rows` rows each, in `pair_table`'s order (its grouping:
    a document's rows made contiguous); an empty table is one empty piece."""
    sentences, bounds, _ = _grouped(sentences)  # the grouping pair_table applies, so the order is its own
    pieces, first = [], 0
    for d in range(1, len(bounds)):
        if bounds[d] - bounds[first] >= max_rows or d == len(bounds) - 1:
            start = int(bounds[first])
            pieces.append(sentences.slice(start, int(bounds[d]) - start))
            first = d
    return pieces or [sentences]


def pair_pieces(
    sentences: pa.Table,
    config: PairConfig,
    max_rows: int | None = None,
    report: Callable[[int], None] | None = None,
) -> tuple[pa.Table, dict[str, int]]:
    """`pair_table` piece by piece (`max_rows`: `PIECE_SENTENCES`; `report(sentences)` after each); the
    same rows and counts as one call."""
    tables, counts = [], {}
    for piece in document_pieces(sentences, max_rows or PIECE_SENTENCES):
        pairs, piece_counts = pair_table(piece, config)
        tables.append(pairs)
        for k, v in piece_counts.items():
            counts[k] = counts.get(k, 0) + v
        if report:
            report(piece.num_rows)
    table = tables[0] if len(tables) == 1 else pa.concat_tables(tables).combine_chunks()
    return table, counts


def pair_shard(
    in_path: str, out_dir: str, index: int, config: PairConfig, report: Callable[[int], None] | None = None
) -> dict[str, int]:
    """Documents never straddle shards (split writes shard i from documents shard i); `report(n)`
    is called with the sentences done, piece by piece (those of held-out documents when they are dropped)."""
    sentences = read_shard(in_path, ["doc_id", "sent_id", "is_title", "text", "norm"])
    n_read = sentences.num_rows
    sentences, held_out = drop_held_out(sentences, config.holdout_percent)
    if report and sentences.num_rows < n_read:
        report(n_read - sentences.num_rows)
    pairs, counts = pair_pieces(sentences, config, report=report)
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
    on_progress: Callable[[int], None] | None = None,
) -> None:
    """Pair every sentences shard whose pairs shard is not done yet; `on_progress(sentences)` as pieces finish."""
    from tasks.runtime.map_shards import map_shards

    map_shards(pair_shard, in_shards, out_dir, config, workers, on_shard, on_progress)
