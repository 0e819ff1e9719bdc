"""Dedup and global shuffle: order/case variants collapse, seeds, bucket shards, both forms, resume, memory."""

from __future__ import annotations

import random
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash

from storage.shards import write_shard
from tasks.shuffle.phases import (
    ShuffleConfig,
    batches_with_same_document,
    check_disk,
    choose_partitions,
    disk_needed,
    pair_id_values,
    pair_ids_from_keys,
    partition_shard,
    partitioned_dir,
    shard_schema,
    shuffle_all,
    shuffle_keys,
    sort_partition,
    sorted_stats,
    uncompressed_bytes,
    write_bucket_shards,
)
from tasks.split.sentences import normalize
from tests.helpers import REPO

PAIR_TYPES = {"a_sent_id": pa.int32(), "b_sent_id": pa.int32(), "lcs_len": pa.int32(), "lcs_weight": pa.int32()}


def pair_id(a: str, b: str) -> str:
    """The pair stage's id: xxh64 of the canonical (sorted) pair of norm forms."""
    na, nb = sorted((normalize(a), normalize(b)))
    return xxhash.xxh64_hexdigest(f"{na}\n{nb}".encode())


def pair_rows(docs: list[tuple[str, list[tuple[str, str]]]]) -> pa.Table:
    rows = []
    for doc_id, pairs in docs:
        for i, (a, b) in enumerate(pairs):
            rows.append(
                {
                    "pair_id": pair_id(a, b),
                    "doc_id": doc_id,
                    "a_sent_id": i,
                    "b_sent_id": i + 1,
                    "a": a,
                    "b": b,
                    "kind": "content",
                    "lcs": "x",
                    "lcs_len": 1,
                    "lcs_weight": 3,
                    "bucket": "short" if max(len(a), len(b)) < 64 else "long",
                }
            )
    table = pa.Table.from_pylist(rows)
    return table.cast(pa.schema([pa.field(f.name, PAIR_TYPES.get(f.name, f.type)) for f in table.schema]))


def random_pairs(n_docs: int, seed: int, per_doc: int = 8, long_every: int = 3) -> pa.Table:
    rng = random.Random(seed)
    words = "graph node edge model data train token loss batch shard".split()
    docs = []
    for d in range(n_docs):
        pairs = []
        for j in range(per_doc):
            k = 30 if (d + j) % long_every == 0 else 5
            pairs.append((" ".join(rng.choices(words, k=k)), " ".join(rng.choices(words, k=k))))
        docs.append((f"doc-{d:05d}", pairs))
    return pair_rows(docs)


def write_input(folder, table, shards=3):
    size = -(-table.num_rows // shards)
    return [write_shard(folder, i, table.slice(i * size, size)) for i in range(shards)]


def read_bucket(out, bucket):
    files = sorted((out / bucket).glob("part-*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files]) if files else None


def test_order_and_case_variants_collapse_keeping_first_provenance(tmp_path):
    table = pair_rows(
        [
            ("doc-b", [("Spike is chasing Tom.", "Spike is chasing Jerry.")]),
            ("doc-a", [("spike is  chasing jerry.", "SPIKE IS CHASING TOM.")]),  # order + case + space variant
            ("doc-c", [("Tom is chasing Jerry.", "Jerry is chasing Tom.")]),
            ("doc-a", [("Tom is chasing Jerry.", "Jerry is chasing Tom.")]),
            ("doc-a", [("jerry is chasing tom.", "tom is chasing jerry.")]),
        ]
    )
    inputs = write_input(tmp_path / "in", table, shards=2)
    stats = shuffle_all(inputs, tmp_path / "out", ShuffleConfig(rows_per_shard=10))
    rows = read_bucket(tmp_path / "out", "short").to_pylist()
    assert len(rows) == 2
    kept = {r["a"]: r["doc_id"] for r in rows}
    assert kept == {"spike is  chasing jerry.": "doc-a", "Tom is chasing Jerry.": "doc-a"}
    assert stats["rows_in"] == 5 and stats["rows_out"] == 2
    # Removed rows are compared with the kept row: doc-b's and doc-c's copies come from other
    # documents (2), doc-a's second copy of the Tom pair from the same one (1).
    assert stats["duplicate_across_documents"] == 2 and stats["duplicate_same_document"] == 1


def test_shuffle_is_deterministic_per_seed_and_differs_across_seeds(tmp_path):
    table = random_pairs(60, seed=1)
    inputs = write_input(tmp_path / "in", table)
    outs = {}
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        shuffle_all(inputs, tmp_path / name, ShuffleConfig(seed=seed, rows_per_shard=50))
        outs[name] = {
            p.relative_to(tmp_path / name): p.read_bytes() for p in (tmp_path / name).rglob("part-*.parquet")
        }
    assert outs["a"] == outs["b"]
    order_a = read_bucket(tmp_path / "a", "short").column("pair_id").to_pylist()
    order_c = read_bucket(tmp_path / "c", "short").column("pair_id").to_pylist()
    assert order_a != order_c and sorted(order_a) == sorted(order_c)
    keys = read_bucket(tmp_path / "a", "short").column("shuffle_key").to_numpy()
    assert (np.diff(keys.astype(np.float64)) >= 0).all(), "rows are in shuffle_key order"


def test_shards_per_bucket_add_up(tmp_path):
    table = random_pairs(40, seed=2)
    inputs = write_input(tmp_path / "in", table)
    stats = shuffle_all(inputs, tmp_path / "out", ShuffleConfig(rows_per_shard=37))
    short, long = read_bucket(tmp_path / "out", "short"), read_bucket(tmp_path / "out", "long")
    assert short.num_rows + long.num_rows == stats["rows_out"] == len(set(table.column("pair_id").to_pylist()))
    assert set(short.column("bucket").to_pylist()) == {"short"} and set(long.column("bucket").to_pylist()) == {"long"}
    sizes = [pq.ParquetFile(p).metadata.num_rows for p in sorted((tmp_path / "out" / "short").glob("*.parquet"))]
    assert all(s == 37 for s in sizes[:-1]) and 0 < sizes[-1] <= 37
    assert stats["shards_short"] == len(sizes) and stats["rows_short"] == short.num_rows
    # Every shard row is an input row, column for column (`pair_id` and `bucket` are rebuilt).
    rows = {tuple(r.values()) for r in table.to_pylist()}
    for bucket in (short, long):
        assert bucket.schema.names == [*table.schema.names, "shuffle_key"]
        assert all(tuple(r.values())[:-1] in rows for r in bucket.to_pylist())


def test_single_and_two_phase_forms_give_the_same_bytes(tmp_path):
    table = random_pairs(80, seed=3)
    table = pa.concat_tables([table, table.slice(0, 50)])  # duplicates across input shards
    inputs = write_input(tmp_path / "in", table, shards=4)
    one = shuffle_all(inputs, tmp_path / "one", ShuffleConfig(partitions=1, rows_per_shard=64))
    many = shuffle_all(inputs, tmp_path / "many", ShuffleConfig(partitions=8, rows_per_shard=64))
    # The mapped flow's path: phases handing off through files (sorted partitions on disk).
    config, work = ShuffleConfig(partitions=4, rows_per_shard=64), tmp_path / "files" / "_work"
    for i, path in enumerate(inputs):
        partition_shard(path, i, work, config, 4)
    for part in range(4):
        sort_partition(part, work, config, 4)
    files_stats = write_bucket_shards(work, tmp_path / "files", 4, config, shard_schema(inputs))
    files = sorted(p.relative_to(tmp_path / "one") for p in (tmp_path / "one").rglob("part-*.parquet"))
    for other in ("many", "files"):
        assert files == sorted(p.relative_to(tmp_path / other) for p in (tmp_path / other).rglob("part-*.parquet"))
        for f in files:
            assert (tmp_path / "one" / f).read_bytes() == (tmp_path / other / f).read_bytes()
    assert files_stats["rows_out"] == one["rows_out"]
    assert sorted_stats(work, 4)["duplicate_across_documents"] == one["duplicate_across_documents"]
    assert (
        one["rows_out"] == many["rows_out"] and one["duplicate_across_documents"] == many["duplicate_across_documents"]
    )
    assert many["partitions"] == 8


def test_global_shuffle_keeps_false_negative_batches_near_uniform(tmp_path):
    table = random_pairs(400, seed=4, per_doc=8, long_every=10**9)
    inputs = write_input(tmp_path / "in", table)
    stats = shuffle_all(inputs, tmp_path / "out", ShuffleConfig(batch_size=32))
    ours, uniform = stats["false_negative_batches_short"], stats["false_negative_batches_short_uniform"]
    assert stats["false_negative_batches_short_unshuffled"] == 1.0
    assert abs(ours - uniform) < 0.2 and ours < 0.8


def test_no_pairs_gives_one_empty_shard_per_bucket(tmp_path):
    empty = random_pairs(1, seed=0).slice(0, 0)
    inputs = write_input(tmp_path / "in", empty, shards=1)
    stats = shuffle_all(inputs, tmp_path / "out", ShuffleConfig(partitions=2))
    assert stats["rows_out"] == 0 and stats["shards_short"] == stats["shards_long"] == 1
    for bucket in ("short", "long"):
        table = pq.read_table(tmp_path / "out" / bucket / "part-00000.parquet")
        assert table.num_rows == 0 and "shuffle_key" in table.column_names


def test_empty_input_shards_add_no_chunk_and_change_no_byte(tmp_path):
    """A folder corpus gives a pairs shard per file, most of them empty for titles or short notes: they are
    marked done without a chunk file written and read back, and the shards are those of the rows alone."""
    table = random_pairs(40, seed=7)
    inputs = write_input(tmp_path / "in", table, shards=2)
    empty = table.slice(0, 0)
    mixed = [write_shard(tmp_path / "mixed", i, part) for i, part in enumerate([empty, table, empty, empty])]
    config = ShuffleConfig(partitions=2, rows_per_shard=50)
    plain = shuffle_all(inputs, tmp_path / "plain", config)
    stats = shuffle_all(mixed, tmp_path / "with-empty", config)
    assert stats["rows_out"] == plain["rows_out"]
    files = sorted(p.relative_to(tmp_path / "plain") for p in (tmp_path / "plain").rglob("part-*.parquet"))
    assert files == sorted(
        p.relative_to(tmp_path / "with-empty") for p in (tmp_path / "with-empty").rglob("part-*.parquet")
    )
    for f in files:
        assert (tmp_path / "plain" / f).read_bytes() == (tmp_path / "with-empty" / f).read_bytes()
    work = tmp_path / "files" / "_work"
    for i, path in enumerate(mixed):
        partition_shard(path, i, work, config, 2)
    chunks = sorted(p.name for p in partitioned_dir(work, 2).glob("chunk-*.arrow"))
    assert chunks == ["chunk-00001.arrow"]
    done = sorted(p.name for p in (partitioned_dir(work, 2) / "_done").iterdir())
    assert done == ["00000", "00001", "00002", "00003"]


def test_batches_with_same_document_counts_full_batches_only():
    # batches [0 1 2] [3 3 4] [5 6 7], tail [8] ignored: one of three has a repeat.
    assert batches_with_same_document(np.array([0, 1, 2, 3, 3, 4, 5, 6, 7, 8]), 3) == pytest.approx(1 / 3)


def splitmix64_reference(x: int) -> int:
    """SplitMix64's finalizer in plain Python integers."""
    mask = 2**64 - 1
    z = (x + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def test_shuffle_key_is_version_stable_and_seeded():
    ids = pa.array(["0000000000000000", "ffffffffffffffff", "0123456789abcdef"])
    assert pair_id_values(ids).tolist() == [0, 2**64 - 1, 0x0123456789ABCDEF]
    # Pinned values: a change here silently reorders every user's shards, so it needs a new code version.
    assert shuffle_keys(ids, 0).tolist() == [0xA706DD2F4D197E6F, 0x2DD82C88FA32B270, 0x13182864BD1A9954]
    assert shuffle_keys(ids, 1).tolist() == [0x5E41AB087439611E, 0xA562DF66C82C649A, 0x4A0FAB93CD1A3B84]
    rng = random.Random(3)
    for seed in (0, 1, 2**63 + 5, -7):
        values = [rng.getrandbits(64) for _ in range(50)]
        expected = [splitmix64_reference(v ^ splitmix64_reference(seed % 2**64)) for v in values]
        assert shuffle_keys(pa.array([f"{v:016x}" for v in values]), seed).tolist() == expected
    with pytest.raises(ValueError, match="row 0 has pair_id 'abc', expected 16 lowercase hexadecimal"):
        shuffle_keys(pa.array(["abc"]), 0)
    for bad in ("0123456789abcdeg", "0123456789abcde ", "0123456789abcdé", "0123456789ABCDEF", None):
        with pytest.raises(ValueError, match=f"row 1 has pair_id {bad!r}, expected 16 lowercase hexadecimal"):
            pair_id_values(pa.array(["0000000000000000", bad]))


def test_pair_id_is_recomputed_exactly_from_the_key():
    """The intermediates leave `pair_id` out; the shard writer inverts the key to get it back."""
    rng = random.Random(11)
    values = [0, 1, 2**63, 2**64 - 1, *(rng.getrandbits(64) for _ in range(2000))]
    ids = pa.array([f"{v:016x}" for v in values])
    for seed in (0, 1, 2**64 - 1, -3):
        assert pair_ids_from_keys(shuffle_keys(ids, seed), seed).equals(ids)
    assert not pair_ids_from_keys(shuffle_keys(ids, 0), 1).equals(ids)
    assert len(pair_ids_from_keys(np.zeros(0, np.uint64), 0)) == 0


def test_variants_on_both_sides_of_the_bucket_boundary_collapse_into_one_row(tmp_path):
    """Whitespace can push one variant of a pair past the short/long length boundary: the copies
    still meet, and only the kept row's bucket holds the pair."""
    a, b = "Tom is chasing Jerry around the kitchen table all day long ok.", "Jerry is chasing Tom today."
    assert len(a) < 64 < len(a.replace(" ", "   "))
    table = pair_rows([("doc-b", [(a, b)]), ("doc-a", [(a.replace(" ", "   "), b)]), ("doc-c", [("x y", "y x")])])
    assert table.column("bucket").to_pylist() == ["short", "long", "short"]
    inputs = write_input(tmp_path / "in", table, shards=2)
    for partitions in (1, 4):
        out = tmp_path / f"p{partitions}"
        stats = shuffle_all(inputs, out, ShuffleConfig(partitions=partitions))
        long, short = read_bucket(out, "long").to_pylist(), read_bucket(out, "short").to_pylist()
        assert [(r["doc_id"], r["bucket"]) for r in long] == [("doc-a", "long")]
        assert [r["doc_id"] for r in short] == ["doc-c"]
        assert stats["duplicate_across_documents"] == 1 and stats["rows_out"] == 2


def test_a_bad_pair_id_fails_naming_file_and_row(tmp_path, monkeypatch):
    import tasks.shuffle.phases as shuffle_pairs

    monkeypatch.setattr(shuffle_pairs, "INPUT_SLICE_ROWS", 8)  # the row is counted across slices
    table = random_pairs(10, seed=1)
    ids = table.column("pair_id").to_pylist()
    ids[40 + 13] = ids[40 + 13].upper()
    table = table.set_column(0, "pair_id", pa.array(ids))
    inputs = write_input(tmp_path / "in", table, shards=2)
    message = r"part-00001.parquet: row 13 has pair_id '[0-9A-F]{16}', expected 16 lowercase hexadecimal"
    with pytest.raises(ValueError, match=message):
        shuffle_all(inputs, tmp_path / "out", ShuffleConfig())


def test_a_row_of_an_unknown_bucket_fails_naming_file_and_row(tmp_path):
    table = random_pairs(5, seed=1)
    buckets = table.column("bucket").to_pylist()
    buckets[7] = "medium"
    table = table.set_column(table.schema.get_field_index("bucket"), "bucket", pa.array(buckets))
    inputs = write_input(tmp_path / "in", table, shards=2)
    message = r"part-00000.parquet: row 7 has bucket 'medium', expected one of short, long"
    with pytest.raises(ValueError, match=message):
        shuffle_all(inputs, tmp_path / "out", ShuffleConfig())


def test_partition_count_follows_input_size():
    assert choose_partitions(10**6, "1GB") == 1
    assert choose_partitions(5 * 10**9, "1GB") == 128  # a partition is at most 1/16 of the limit
    assert choose_partitions(5 * 10**9, "2GB") == 64


CRASH_RUN = """
import sys
from pathlib import Path
from tasks.shuffle.phases import ShuffleConfig, shuffle_all
root = Path(sys.argv[1])
inputs = sorted((root.parent / "in").glob("part-*.parquet"))
shuffle_all(inputs, root / "out", ShuffleConfig(partitions=int(sys.argv[2]), rows_per_shard=200))
(root / "finished").touch()
"""


@pytest.mark.slow
def test_crash_mid_stage_resumes_to_identical_bytes(tmp_path):
    table = random_pairs(3000, seed=5, per_doc=10)
    write_input(tmp_path / "in", table, shards=20)
    subprocess.run([sys.executable, "-c", CRASH_RUN, str(tmp_path / "clean"), "16"], cwd=REPO, check=True)
    proc = subprocess.Popen([sys.executable, "-c", CRASH_RUN, str(tmp_path / "crash"), "16"], cwd=REPO)
    marker = tmp_path / "crash" / "out" / "_done" / "short-00002"  # output shards are being written
    deadline = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    proc.kill()
    proc.wait()
    assert not (tmp_path / "crash" / "finished").exists(), "finished before the kill"
    subprocess.run([sys.executable, "-c", CRASH_RUN, str(tmp_path / "crash"), "16"], cwd=REPO, check=True)
    clean = {p.relative_to(tmp_path / "clean"): p.read_bytes() for p in (tmp_path / "clean").rglob("part-*.parquet")}
    crash = {p.relative_to(tmp_path / "crash"): p.read_bytes() for p in (tmp_path / "crash").rglob("part-*.parquet")}
    assert clean == crash and clean


@pytest.mark.slow
def test_memory_limit_far_below_input_completes(tmp_path):
    table = random_pairs(6000, seed=6, per_doc=20, long_every=1)  # ~110 MB of strings in memory
    inputs = write_input(tmp_path / "in", table, shards=4)
    raw = table.nbytes
    config = ShuffleConfig(memory_limit="24MB", threads=1)  # partitions chosen to fit the limit
    stats = shuffle_all(inputs, tmp_path / "out", config)
    assert raw > 2 * 24e6, f"input only {raw} bytes"
    assert stats["partitions"] >= 8
    assert stats["rows_out"] == len(set(table.column("pair_id").to_pylist()))


def test_pair_repeated_across_many_documents_is_collapsed_early_with_exact_counts(tmp_path, monkeypatch):
    """Boilerplate (the same pair on every product page) must not pile up in one partition, and
    the manifest's same-/across-document counts must equal a plain group-by over the input."""
    import tasks.shuffle.phases as shuffle_pairs

    monkeypatch.setattr(shuffle_pairs, "INPUT_SLICE_ROWS", 64)  # many slices, so the combiner has work
    rng = random.Random(7)
    boiler = [
        ("Free shipping on orders over $50.", "Free returns on orders over $50."),
        ("free RETURNS on orders over $50.", "Free shipping on  orders over $50."),
    ]
    docs = []
    for d in rng.sample(range(300), 300):  # documents in no particular order: the winner is not the first row
        repeats = 3 if d == 0 else rng.choice([1, 1, 2])  # page 0 wins: its repeats are same-document duplicates
        pairs = [rng.choice(boiler) for _ in range(repeats)]
        pairs += [(f"item {d} fits size {j}", f"item {d} fits size {j + 1}") for j in range(rng.randint(0, 3))]
        docs.append((f"page-{d:04d}", pairs))
    table = pair_rows(docs)
    inputs = write_input(tmp_path / "in", table, shards=3)
    stats = shuffle_all(inputs, tmp_path / "out", ShuffleConfig(partitions=4, rows_per_shard=100))

    # Reference: per pair_id, the first row by (doc_id, a_sent_id, b_sent_id, input position).
    groups: dict[str, list[tuple]] = {}
    for pos, r in enumerate(table.to_pylist()):
        groups.setdefault(r["pair_id"], []).append((r["doc_id"], r["a_sent_id"], r["b_sent_id"], pos))
    winners = {pid: min(rows) for pid, rows in groups.items()}
    same = sum(sum(row[0] == winners[pid][0] for row in rows) - 1 for pid, rows in groups.items())
    dropped = table.num_rows - len(groups)
    assert stats["duplicate_same_document"] == same > 0
    assert stats["duplicate_across_documents"] == dropped - same > 250
    kept = pa.concat_tables([read_bucket(tmp_path / "out", b) for b in ("short", "long")]).to_pylist()
    assert {r["pair_id"]: (r["doc_id"], r["a_sent_id"], r["b_sent_id"]) for r in kept} == {
        pid: w[:3] for pid, w in winners.items()
    }

    # The combiner kept at most one row of the boilerplate pair per input slice.
    boiler_id = pair_id(*boiler[0])
    slices = sum(-(-pq.ParquetFile(p).metadata.num_rows // 64) for p in inputs)
    partitioned = pa.concat_tables(
        pa.ipc.open_file(str(p)).read_all()
        for p in sorted(partitioned_dir(tmp_path / "out" / "_work", 4).glob("*.arrow"))
    )
    keys = partitioned.column("shuffle_key").to_pylist()
    boiler_key = shuffle_keys(pa.array([boiler_id]), 0)[0]
    assert len(groups[boiler_id]) > 300 and keys.count(boiler_key) <= slices < len(groups[boiler_id])


def test_config_rejects_unknown_codecs_and_limits():
    with pytest.raises(ValueError, match="shard_compression must be one of"):
        ShuffleConfig(shard_compression="zip")
    with pytest.raises(ValueError, match="spill_compression"):
        ShuffleConfig(spill_compression="snappy")
    for bad in ("lots", "inf", "nan"):
        with pytest.raises(ValueError, match="memory_limit must look like"):
            ShuffleConfig(memory_limit=bad)
    for tiny in ("0", "-1GB", "1e-9", "1MB"):
        with pytest.raises(ValueError, match="memory_limit must be at least 16MB"):
            ShuffleConfig(memory_limit=tiny)
    assert ShuffleConfig(memory_limit=" 512MiB ").memory_limit == " 512MiB "


def test_resume_with_another_partition_count_starts_phase_one_afresh(tmp_path):
    """Files cut for 4 partitions are not read as if cut for 2 (4 % 2 == 0 would pass a count check)."""
    table = random_pairs(80, seed=5)
    table = pa.concat_tables([table, table.slice(0, 40)])
    inputs = write_input(tmp_path / "in", table, shards=2)
    fresh = shuffle_all(inputs, tmp_path / "fresh", ShuffleConfig(partitions=2, rows_per_shard=64))
    for i, path in enumerate(inputs):  # an earlier, interrupted run with a larger memory limit
        partition_shard(path, i, tmp_path / "resumed" / "_work", ShuffleConfig(partitions=4), 4)
    resumed = shuffle_all(inputs, tmp_path / "resumed", ShuffleConfig(partitions=2, rows_per_shard=64))
    assert resumed["rows_out"] == fresh["rows_out"]
    for bucket in ("short", "long"):
        assert read_bucket(tmp_path / "resumed", bucket).equals(read_bucket(tmp_path / "fresh", bucket))


def test_codecs_change_the_shards_not_the_rows(tmp_path):
    """Shard and spill codecs only change the encoding: the same rows in the same order."""
    inputs = write_input(tmp_path / "in", random_pairs(60, seed=3), shards=2)
    snappy = shuffle_all(inputs, tmp_path / "snappy", ShuffleConfig(rows_per_shard=64, partitions=2))
    zstd_config = ShuffleConfig(rows_per_shard=64, partitions=2, shard_compression="zstd", spill_compression="lz4")
    zstd = shuffle_all(inputs, tmp_path / "zstd", zstd_config)
    assert snappy["rows_out"] == zstd["rows_out"] > 0
    for bucket in ("short", "long"):
        assert read_bucket(tmp_path / "snappy", bucket).equals(read_bucket(tmp_path / "zstd", bucket))
        for out, codec in (("snappy", "SNAPPY"), ("zstd", "ZSTD")):
            files = sorted((tmp_path / out / bucket).glob("part-*.parquet"))
            assert {pq.ParquetFile(f).metadata.row_group(0).column(4).compression for f in files} == {codec}


@pytest.mark.parametrize(("shard_codec", "spill_codec"), [("snappy", "none"), ("zstd", "lz4"), ("none", "zstd")])
def test_disk_estimate_bounds_what_the_stage_writes(tmp_path, shard_codec, spill_codec):
    """At its end the stage holds its intermediates and its shards: the estimate covers both, closely."""
    inputs = write_input(tmp_path / "in", random_pairs(2000, seed=1))
    config = ShuffleConfig(partitions=8, shard_compression=shard_codec, spill_compression=spill_codec)
    need = disk_needed(uncompressed_bytes(inputs), config)
    shuffle_all(inputs, tmp_path / "out", config)
    written = sum(p.stat().st_size for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert written <= need <= 1.5 * written


def test_too_little_disk_fails_before_any_work(tmp_path):
    with pytest.raises(OSError, match=r"needs about 1000000000.0 GB more disk under .*spill_compression=\"lz4\""):
        check_disk(tmp_path / "stage" / "out", 10**18)
    assert not (tmp_path / "stage").exists()
    check_disk(tmp_path / "stage" / "out", 1000)  # a kilobyte fits


def test_the_allocator_is_the_callers_again_after_the_stage(tmp_path):
    before = pa.default_memory_pool().backend_name
    inputs = write_input(tmp_path / "in", random_pairs(20, seed=2))
    with pytest.raises(FileNotFoundError):  # also when the stage fails
        shuffle_all([tmp_path / "missing.parquet"], tmp_path / "out", ShuffleConfig())
    assert shuffle_all(inputs, tmp_path / "ok", ShuffleConfig())["rows_out"] > 0
    assert pa.default_memory_pool().backend_name == before
