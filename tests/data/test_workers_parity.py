"""The default path, a spawned process pool in split and pair (`workers` > 1), writes the bytes `workers=1` writes."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

import pyarrow.parquet as pq
import pytest

from samples.pair_corpus import part_hashes, write_corpus  # noqa: E402

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.slow]

# 600 documents, 150 per shard: 4 shards of documents, sentences and pairs; about 3,000 pairs
# at 400 rows per training shard: at least 3 shards of each bucket.
PARAMS = dict(docs_per_shard=150, rows_per_shard=400)


def test_two_workers_write_the_same_bytes_as_one(tmp_path, monkeypatch):
    import tasks.runtime.map_shards as map_shards
    from flows.build_pairs import build_pairs
    from storage.manifest import read_manifest

    pools = []

    class RecordingPool(ProcessPoolExecutor):  # proves the pool ran, not a quiet fallback to one process
        def __init__(self, max_workers=None, **kwargs):
            pools.append(max_workers)
            super().__init__(max_workers=max_workers, **kwargs)

    monkeypatch.setattr(map_shards, "ProcessPoolExecutor", RecordingPool)
    monkeypatch.setattr(map_shards, "MIN_BYTES_PER_WORKER", 0)  # tiny shards: spawn anyway, to compare
    corpus = write_corpus(tmp_path / "corpus.jsonl", n_docs=600)
    one = build_pairs(input_path=str(corpus), root=str(tmp_path / "one"), workers=1, **PARAMS)
    assert pools == []
    two = build_pairs(input_path=str(corpus), root=str(tmp_path / "two"), workers=2, **PARAMS)
    assert pools == [2, 2]  # split, then pair
    assert two == one  # `workers` is in no fingerprint

    hashes = part_hashes(tmp_path / "one", one)
    counts = {stage: len(files) for stage, files in hashes.items()}
    assert {k: v for k, v in counts.items() if k != "shuffle"} == {"ingest": 8, "split": 4, "pair": 4}  # + rejects
    # The shuffle's shards hold the pair table's distinct pairs of their bucket, 400 to a shard but the last.
    pair_dir = tmp_path / "one" / one["pairs"]["path"]
    pairs = [
        pq.read_table(p, columns=["pair_id", "bucket"]).to_pylist() for p in sorted(pair_dir.rglob("part-*.parquet"))
    ]
    distinct = {(r["pair_id"], r["bucket"]) for part in pairs for r in part}  # the shuffle deduplicates
    shuffle_dir = tmp_path / "one" / one["shards"]["path"]
    for bucket in ("short", "long"):
        sizes = [pq.ParquetFile(p).metadata.num_rows for p in sorted((shuffle_dir / bucket).glob("part-*.parquet"))]
        assert sum(sizes) == sum(b == bucket for _, b in distinct) and len(sizes) >= 3, (bucket, sizes)
        assert all(n == PARAMS["rows_per_shard"] for n in sizes[:-1]) and 0 < sizes[-1] <= PARAMS["rows_per_shard"]
    assert counts["shuffle"] == sum(1 for name in hashes["shuffle"] if name.split("/")[0] in ("short", "long"))
    assert part_hashes(tmp_path / "two", two) == hashes
    for ref in one.values():
        first, second = read_manifest(tmp_path / "one" / ref["path"]), read_manifest(tmp_path / "two" / ref["path"])
        assert (second["rows"], second["drops"]) == (first["rows"], first["drops"]), ref["stage"]
        assert second["files"] == first["files"], ref["stage"]  # every file with its SHA-256, counts included


def test_small_pending_input_stays_in_this_process(tmp_path, monkeypatch):
    """A pool is started only when the pending input pays for its workers' start-up."""
    import tasks.runtime.map_shards as map_shards

    shards = []
    for i, size in enumerate((300, 500)):
        shards.append(tmp_path / f"part-{i:05d}.parquet")
        shards[-1].write_bytes(b"x" * size)
    pending = list(enumerate(shards))
    monkeypatch.setattr(map_shards, "MIN_BYTES_PER_WORKER", 1000)
    assert map_shards.worth_spawning(pending) == 1  # 800 bytes: this process alone
    monkeypatch.setattr(map_shards, "MIN_BYTES_PER_WORKER", 400)
    assert map_shards.worth_spawning(pending) == 2
    monkeypatch.setattr(map_shards, "MIN_BYTES_PER_WORKER", 0)
    assert map_shards.worth_spawning(pending) == 2  # 0: one worker a shard, whatever the size
