"""Dedup and global shuffle of the pairs table into per-bucket training shards.

Three phases that hand off through files, so each can run anywhere and resume:

1. partition: every input shard is cut into P partitions by the top bits of `shuffle_key`.
   The key is a seeded hash of `pair_id` (itself a hash of the canonical, order-insensitive
   normalized pair), so duplicates always meet in one partition, and partition p holds one
   contiguous range of keys.
2. sort: each partition is ordered by (`shuffle_key`, provenance) with DuckDB
   under a memory limit, spilling to disk when it must.
3. write: partitions are read back in order, which is the global order; of each run of
   equal `pair_id`s the first row (smallest doc_id, sentence ids) is kept, and the rows are
   cut into `short/` and `long/` shards of a fixed number of rows.

P = 1 is the single-node out-of-core form (one DuckDB sort over everything); P > 1 is the
two-phase form whose partitions can be sorted on different workers. Both give the same bytes.

`shuffle_key` = splitmix64(pair_id ^ splitmix64(seed)): plain 64-bit arithmetic defined
here, so it never changes with a DuckDB or library version (DuckDB's `hash()` may).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage.shards import shard_done, sweep_temporaries, write_shard

SHUFFLE_CODE_VERSION = "shuffle_v1"
BUCKETS = ("short", "long")
WORK_DIR = "_work"
LOW_CARDINALITY = ["doc_id", "kind", "bucket", "rule"]  # the only columns worth dictionary-encoding
INTERMEDIATE_CODEC = "snappy"  # files read once and deleted: cheap compression beats small files
_HEX_VALUES = np.full(256, 255, dtype=np.uint8)
_HEX_VALUES[np.frombuffer(b"0123456789abcdef", np.uint8)] = np.arange(16, dtype=np.uint8)
_HEX_VALUES[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16, dtype=np.uint8)


@dataclass(frozen=True)
class ShuffleConfig:
    seed: int = 0
    rows_per_shard: int = 100_000
    row_group_rows: int = 10_000  # streaming readers fetch one row group at a time
    partitions: int = 0  # 0: chosen from input size and memory limit; 1: single-node form
    memory_limit: str = "1GB"  # DuckDB's limit for one partition sort; it spills beyond it
    threads: int = 0  # DuckDB threads per sort (0: all cores)
    batch_size: int = 256  # for the false-negative measurement (pairs of one document in one batch)

    def output_fields(self) -> dict[str, int]:
        """What the output bytes depend on: partitions, memory and threads only change how it is computed."""
        return {k: getattr(self, k) for k in ("seed", "rows_per_shard", "row_group_rows", "batch_size")}


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def pair_id_values(pair_ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """16-character hex `pair_id`s as uint64, vectorised over the Arrow buffer."""
    arr = pair_ids.combine_chunks() if isinstance(pair_ids, pa.ChunkedArray) else pair_ids
    arr = arr.cast(pa.string())
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    if arr.null_count or not pc.all(pc.equal(pc.utf8_length(arr), 16)).as_py():
        raise ValueError("pair_id must be 16 hexadecimal characters (as the pair stage writes them)")
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4)
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)
    chars = data[offsets[0] : offsets[0] + 16 * n].reshape(n, 16)
    nibbles = _HEX_VALUES[chars]
    if (nibbles == 255).any():
        raise ValueError("pair_id must be hexadecimal")
    shifts = np.arange(60, -4, -4, dtype=np.uint64)
    return np.bitwise_or.reduce(nibbles.astype(np.uint64) << shifts, axis=1)


def shuffle_keys(pair_ids: pa.Array | pa.ChunkedArray, seed: int) -> np.ndarray:
    """The seeded, version-stable shuffle key of each pair."""
    salt = _splitmix64(np.array([seed & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))[0]
    return _splitmix64(pair_id_values(pair_ids) ^ salt)


def choose_partitions(input_bytes: int, memory_limit: str) -> int:
    """A power of two such that one partition (uncompressed) takes at most a quarter of the limit.

    DuckDB's sort spills, but measured here it still ran out of memory when the limit was
    below the data it sorted; keeping partitions well inside the limit is what makes the
    stage finish on inputs many times larger than memory.
    """
    limit = parse_bytes(memory_limit)
    need = max(1, -(-input_bytes * 4 // max(limit, 1)))
    return 1 << (need - 1).bit_length()


def uncompressed_bytes(paths: list[Path]) -> int:
    """In-memory size of Parquet files, from their footers (no data read)."""
    total = 0
    for path in paths:
        meta = pq.ParquetFile(path).metadata
        total += sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    return total


def parse_bytes(text: str) -> int:
    units = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}
    number = text.strip().upper().rstrip()
    for suffix in sorted(units, key=len, reverse=True):
        if suffix and number.endswith(suffix):
            return int(float(number[: -len(suffix)]) * units[suffix])
    return int(float(number))


def partition_bits(partitions: int) -> int:
    if partitions < 1 or partitions & (partitions - 1):
        raise ValueError(f"partitions must be a power of two, got {partitions}")
    return partitions.bit_length() - 1


def partition_shard(in_path: Path, index: int, work: Path, config: ShuffleConfig, partitions: int) -> int:
    """Phase 1 for one input shard: add `shuffle_key`, write its rows to every partition folder."""
    marker_dir = work / "partitioned"
    if shard_done(marker_dir, index):
        return 0
    table = pq.read_table(in_path)
    keys = shuffle_keys(table.column("pair_id"), config.seed)
    table = table.append_column("shuffle_key", pa.array(keys, pa.uint64()))
    bits = partition_bits(partitions)
    part = (keys >> np.uint64(64 - bits)).astype(np.int64) if bits else np.zeros(len(keys), np.int64)
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(partitions + 1))
    if partitions > 1:
        table = table.take(pa.array(order))  # one gather, then zero-copy slices per partition
    for p in range(partitions):
        if bounds[p] == bounds[p + 1]:
            continue
        rows = table.slice(bounds[p], bounds[p + 1] - bounds[p])
        folder = work / "partitions" / f"p-{p:05d}"
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".chunk-{index:05d}.tmp"
        pq.write_table(rows, tmp, compression=INTERMEDIATE_CODEC)
        os.replace(tmp, folder / f"chunk-{index:05d}.parquet")
    (marker_dir / "_done").mkdir(parents=True, exist_ok=True)
    (marker_dir / "_done" / f"{index:05d}").touch()
    return table.num_rows


_SORT = """
COPY (SELECT * FROM read_parquet({files}) ORDER BY shuffle_key, doc_id, a_sent_id, b_sent_id)
TO '{out}' (FORMAT parquet, COMPRESSION snappy, ROW_GROUP_SIZE {row_group})
"""


def sort_partition(p: int, work: Path, config: ShuffleConfig, spill: Path) -> dict[str, int]:
    """Phase 2 for one partition: order by (`shuffle_key`, `pair_id`, provenance) with DuckDB.

    A plain external sort is what DuckDB does best under a memory limit (a window or
    aggregate dedup ran out of memory at limits far below the input); duplicates end up
    adjacent, and phase 3 keeps the first of each run while streaming.
    """
    done = work / "sorted"
    out = done / f"p-{p:05d}.parquet"
    if shard_done(done, p):
        return json.loads((done / f"p-{p:05d}.json").read_text())
    files = sorted((work / "partitions" / f"p-{p:05d}").glob("chunk-*.parquet"))
    done.mkdir(parents=True, exist_ok=True)
    rows_in = 0
    if files:
        spill.mkdir(parents=True, exist_ok=True)
        settings = {
            "memory_limit": config.memory_limit,
            "temp_directory": str(spill),
            "preserve_insertion_order": False,  # ORDER BY is still honoured
        }
        if config.threads:
            settings["threads"] = config.threads
        con = duckdb.connect(":memory:", config=settings)
        try:
            listing = "[" + ", ".join("'" + str(f).replace("'", "''") + "'" for f in files) + "]"
            tmp = done / f".p-{p:05d}.tmp.parquet"
            sql = _SORT.format(files=listing, out=str(tmp).replace("'", "''"), row_group=config.row_group_rows)
            con.execute(sql)
            os.replace(tmp, out)
        finally:
            con.close()
        rows_in = pq.ParquetFile(out).metadata.num_rows
    stats = {"rows_in": rows_in}
    (done / f"p-{p:05d}.json").write_text(json.dumps(stats, sort_keys=True))
    (done / "_done").mkdir(exist_ok=True)
    (done / "_done" / f"{p:05d}").touch()
    return stats


class _Dedup:
    """Keeps the first row of each run of equal `pair_id`s across batches; counts the rest."""

    def __init__(self) -> None:
        self.last_id: str | None = None
        self.last_doc: str | None = None
        self.same_document = 0
        self.across_documents = 0

    def __call__(self, table: pa.Table) -> pa.Table:
        ids = table.column("pair_id").combine_chunks()
        docs = table.column("doc_id").combine_chunks()
        n = len(ids)
        previous = pa.concat_arrays([pa.array([self.last_id], pa.string()), ids.slice(0, n - 1)])
        first = pc.fill_null(pc.not_equal(ids, previous), True)
        kept_doc = pc.fill_null_forward(
            pa.concat_arrays([pa.array([self.last_doc], pa.string()), pc.if_else(first, docs, None)])
        ).slice(1)
        dropped = pc.invert(first)
        same = pc.and_(dropped, pc.equal(docs, kept_doc))
        self.same_document += pc.sum(same).as_py() or 0
        self.across_documents += (pc.sum(dropped).as_py() or 0) - (pc.sum(same).as_py() or 0)
        self.last_id, self.last_doc = ids[n - 1].as_py(), kept_doc[n - 1].as_py()
        return table.filter(first)


def write_bucket_shards(
    work: Path, out_dir: Path, partitions: int, config: ShuffleConfig, schema: pa.Schema | None = None
) -> dict[str, float]:
    """Phase 3: stream the sorted partitions in order and cut `short/` and `long/` shards.

    Shard k of a bucket always holds rows k*rows_per_shard... of that bucket's global order,
    so finished shards (marker present) are skipped on resume and the bytes do not change.
    """
    buffers: dict[str, list[pa.Table]] = {b: [] for b in BUCKETS}
    buffered = dict.fromkeys(BUCKETS, 0)
    index = dict.fromkeys(BUCKETS, 0)
    rows = dict.fromkeys(BUCKETS, 0)
    fn = FalseNegativeCounter(config.batch_size, config.seed)
    dedup = _Dedup()

    def flush(bucket: str, final: bool = False) -> None:
        while buffered[bucket] >= config.rows_per_shard or (final and buffered[bucket]):
            table = pa.concat_tables(buffers[bucket]).combine_chunks()
            head, rest = table.slice(0, config.rows_per_shard), table.slice(config.rows_per_shard)
            if not shard_done(out_dir, index[bucket], bucket):
                write_shard(
                    out_dir,
                    index[bucket],
                    head,
                    table_name=bucket,
                    row_group_size=config.row_group_rows,
                    dictionary=LOW_CARDINALITY,
                )
            index[bucket] += 1
            buffers[bucket] = [rest] if rest.num_rows else []
            buffered[bucket] = rest.num_rows

    for p in range(partitions):
        path = work / "sorted" / f"p-{p:05d}.parquet"
        if not path.exists():  # no pair fell into this key range
            continue
        pf = pq.ParquetFile(path)
        for batch in pf.iter_batches(batch_size=max(config.row_group_rows, 65_536)):
            table = dedup(pa.Table.from_batches([batch]))
            for bucket in BUCKETS:
                part = table.filter(pc.equal(table.column("bucket"), bucket))
                if part.num_rows:
                    buffers[bucket].append(part)
                    buffered[bucket] += part.num_rows
                    rows[bucket] += part.num_rows
                    fn.add(bucket, part.column("doc_id"))
                    flush(bucket)
    for bucket in BUCKETS:
        flush(bucket, final=True)
        if index[bucket] == 0 and schema is not None:  # an empty bucket still gets one empty shard for its readers
            if not shard_done(out_dir, 0, bucket):
                write_shard(out_dir, 0, schema.empty_table(), table_name=bucket)
            index[bucket] = 1
    stats = {f"rows_{b}": rows[b] for b in BUCKETS} | {f"shards_{b}": index[b] for b in BUCKETS}
    stats |= {"rows_out": sum(rows.values()), "duplicate_same_document": dedup.same_document}
    stats |= {"duplicate_across_documents": dedup.across_documents}
    return stats | fn.summary()


class FalseNegativeCounter:
    """How often a batch holds two pairs of one document (they become false negatives for
    in-batch contrastive loss), in our order and under a uniform random permutation of the
    same rows, over the first `limit` rows of each bucket."""

    def __init__(self, batch_size: int, seed: int, limit: int = 2_000_000) -> None:
        self.batch_size, self.seed, self.limit = batch_size, seed, limit
        self.docs: dict[str, list[pa.Array]] = {b: [] for b in BUCKETS}
        self.count = dict.fromkeys(BUCKETS, 0)

    def add(self, bucket: str, doc_ids: pa.ChunkedArray) -> None:
        room = self.limit - self.count[bucket]
        if room > 0:
            chunk = doc_ids.slice(0, room)
            self.docs[bucket].append(chunk.combine_chunks())
            self.count[bucket] += len(chunk)

    def summary(self) -> dict[str, float]:
        out: dict[str, float] = {}
        rng = np.random.default_rng(self.seed)
        for bucket in BUCKETS:
            if not self.docs[bucket]:
                continue
            codes = pc.dictionary_encode(pa.concat_arrays(self.docs[bucket]))
            ids = np.asarray(codes.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
            out[f"false_negative_batches_{bucket}"] = batches_with_same_document(ids, self.batch_size)
            out[f"false_negative_batches_{bucket}_uniform"] = batches_with_same_document(
                rng.permutation(ids), self.batch_size
            )
            out[f"false_negative_batches_{bucket}_unshuffled"] = batches_with_same_document(
                np.sort(ids), self.batch_size
            )
        return out


def batches_with_same_document(doc_codes: np.ndarray, batch_size: int) -> float:
    """Fraction of full batches of `batch_size` consecutive rows holding two rows of one document."""
    n = len(doc_codes) // batch_size
    if n == 0:
        return 0.0
    batches = np.sort(doc_codes[: n * batch_size].reshape(n, batch_size), axis=1)
    return float(np.mean((batches[:, 1:] == batches[:, :-1]).any(axis=1)))


def shuffle_all(in_shards: list[Path], out_dir: Path, config: ShuffleConfig, spill: Path) -> dict[str, float]:
    """All three phases in this process (the single-machine path); returns summed counts."""
    sweep_temporaries(out_dir)
    work = out_dir / WORK_DIR
    partitions = partitions_for(in_shards, config)
    for i, path in enumerate(in_shards):
        partition_shard(path, i, work, config, partitions)
    stats: dict[str, float] = {"partitions": partitions}
    for p in range(partitions):
        for key, value in sort_partition(p, work, config, spill).items():
            stats[key] = stats.get(key, 0) + value
    stats.update(write_bucket_shards(work, out_dir, partitions, config, shard_schema(in_shards)))
    return stats


def shard_schema(in_shards: list[Path]) -> pa.Schema | None:
    """The output schema: the pairs columns plus `shuffle_key`."""
    if not in_shards:
        return None
    schema = pq.read_schema(in_shards[0]).remove_metadata()
    return schema.append(pa.field("shuffle_key", pa.uint64()))


def partitions_for(in_shards: list[Path], config: ShuffleConfig) -> int:
    return config.partitions or choose_partitions(uncompressed_bytes(in_shards), config.memory_limit)
