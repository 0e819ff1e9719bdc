"""Dedup and global shuffle of the pairs table into per-bucket training shards.

Three phases that hand off through files, so each can run anywhere and resume:

1. partition: every input shard is cut into P partitions by the top bits of `shuffle_key`.
   The key is a seeded hash of `pair_id` (itself a hash of the canonical, order-insensitive
   normalized pair), so duplicates always meet in one partition, and partition p holds one
   contiguous range of keys. Duplicates within a slice of the input are collapsed here
   already (a combiner: the row that would win, plus how many rows it stands for), so a pair
   repeated on millions of pages cannot swell one partition past the memory limit. Each input
   shard becomes one Arrow IPC file (uncompressed: phase 2 memory-maps it) holding, per slice,
   one record batch per partition and bucket. `pair_id` and `bucket` are not written: the
   batch a row sits in gives its bucket, and `pair_id` is recomputed from `shuffle_key` (a
   bijection) when the shard is written, which makes the files smaller (the results log:
   docs/results/, the shuffle's intermediates without pair_id and bucket). Input shards are
   partitioned side by side, as many at once as `_in_flight` allows.
2. sort: each partition is loaded whole (P is chosen so that one fits well inside the memory
   limit), ordered by `shuffle_key` with numpy, and of each run of equal keys the first row
   by (doc_id, a_sent_id, b_sent_id, input position) is kept. The kept rows are written per
   bucket (`short`, `long`) as IPC files, with the partition's counts next to them.
3. write: per bucket, the sorted partitions are read back in order, which is the global
   order, and cut into `short/` and `long/` shards of a fixed number of rows.

P = 1 is the single-node form; P > 1 is the two-phase form whose partitions can be sorted on
different workers. On one machine (`shuffle_all`) phases 2 and 3 run together: a sorted
partition goes straight to the shard writer instead of through a file. All give the same
bytes. A partition is sorted in memory (numpy argsort of the keys, then a gather) rather
than by DuckDB's external `ORDER BY` of whole rows, which is slower and does not keep to the
limit (docs/results/, the shuffle's in-memory sort; the shuffle against DuckDB).

`shuffle_key` = splitmix64(pair_id ^ splitmix64(seed)): plain 64-bit arithmetic defined
here, so it never changes with a library version. It is a bijection of `pair_id`: equal keys
are equal pairs, and the kept rows' keys are unique.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage.atomic import atomic_path
from storage.shards import shard_done, sweep_temporaries, write_shard

SHUFFLE_CODE_VERSION = "shuffle_v2"
BUCKETS = ("short", "long")
WORK_DIR = "_work"
# Layout of the files under `_work/` (not of the shards): in their folder names, so that a run
# resumed by a newer version starts phase 1 afresh instead of misreading older files.
INTERMEDIATE_FORMAT = "f2"
# Columns the intermediates leave out and the shard writer restores (see the module docstring).
DERIVED = ("pair_id", "bucket")
# Shards are written without dictionaries (hashing every value costs more than plain + snappy,
# which compresses repeated values anyway) and without min/max of the text columns (they prune
# no query and cost encoding time: docs/results/, the shuffle's partition share and profile).
NO_STATISTICS = ("a", "b", "lcs")
SHARD_CODECS = ("snappy", "zstd", "lz4", "gzip", "brotli", "none")
SPILL_CODECS = ("none", "lz4", "zstd")
PARTITION_SHARE = 16  # a partition takes at most 1/16 of the memory limit (see choose_partitions)
MIN_MEMORY_LIMIT = 16 * 10**6
# Disk written per byte of the pairs' in-memory size (`uncompressed_bytes`): the benchmark's tables'
# ratios rounded up (docs/results/, the shuffle's intermediates without pair_id and bucket), for the
# intermediates (uncompressed IPC holds the dictionary-encoded columns as plain strings, plus the key
# and count columns) and for the shards.
SPILL_DISK = {"none": 1.3, "lz4": 0.7, "zstd": 0.5}
SHARD_DISK = {"none": 1.4, "snappy": 0.55, "lz4": 0.6, "zstd": 0.4, "gzip": 0.4, "brotli": 0.4}
INPUT_SLICE_ROWS = 1 << 17  # phase 1 reads an input shard this many rows at a time
INTERMEDIATE_BATCH_ROWS = 1 << 16
# Combiner counts carried by intermediate rows: input rows a row stands for, and how many of
# those come from its own document (for the manifest's same-/across-document counts).
ROWS, SAME_DOC = "_rows", "_same_document"


@dataclass(frozen=True)
class ShuffleConfig:
    seed: int = field(default=0, metadata={"help": "seed of the shuffle (build-pairs: PairConfig.seed too)"})
    rows_per_shard: int = field(default=100_000, metadata={"help": "rows per training shard"})
    row_group_rows: int = 10_000  # streaming readers fetch one row group at a time
    partitions: int = 0  # 0: chosen from input size and memory limit; 1: single-node form
    memory_limit: str = field(  # one partition, loaded whole, stays well inside this
        default="1GB",
        metadata={"help": "memory of the dedup + shuffle stage, e.g. 512MB, 4GiB; larger input spills to disk"},
    )
    threads: int = 0  # threads for gathering and writing (0: all cores)
    batch_size: int = 256  # for the false-negative measurement (pairs of one document in one batch)
    # Shards are read whole, once per epoch: snappy encodes and decodes faster than zstd, for
    # larger files ("zstd" when disk matters more; docs/results/, the shuffle's intermediates
    # uncompressed and its shards in snappy).
    shard_compression: str = field(
        default="snappy",
        metadata={"help": "Parquet codec of the training shards: snappy, zstd (smaller, slower), lz4, none"},
    )
    # Intermediate files under `_work/`, written and read once: uncompressed IPC is memory-mapped
    # (no copy on read) and costs no CPU; "lz4" takes less disk space for more time (docs/results/,
    # the shuffle's intermediates uncompressed and its shards in snappy).
    spill_compression: str = field(
        default="none",
        metadata={
            "help": "codec of the shuffle's temporary files (several times the pairs' size on disk): none, lz4 "
            "(less disk, slower), zstd"
        },
    )

    def __post_init__(self) -> None:
        for name, codecs in (("shard_compression", SHARD_CODECS), ("spill_compression", SPILL_CODECS)):
            if getattr(self, name) not in codecs:
                raise ValueError(f"{name} must be one of {', '.join(codecs)}, got {getattr(self, name)!r}")
        parse_bytes(self.memory_limit)

    def output_fields(self) -> dict[str, int | str]:
        """What the output bytes depend on (partitions, memory, threads and spill format only change
        how they are computed)."""
        return {
            k: getattr(self, k)
            for k in ("seed", "rows_per_shard", "row_group_rows", "batch_size", "shard_compression")
        }

    def spill_options(self) -> pa.ipc.IpcWriteOptions:
        return pa.ipc.IpcWriteOptions(compression=None if self.spill_compression == "none" else self.spill_compression)


_GOLDEN, _MIX1, _MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", np.uint8)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x + np.uint64(_GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX2)
        return z ^ (z >> np.uint64(31))


def _unxorshift(y: np.ndarray, shift: int) -> np.ndarray:
    """x from y = x ^ (x >> shift): each round fixes `shift` more of the top bits."""
    x = y
    for _ in range(-(-64 // shift)):
        x = y ^ (x >> np.uint64(shift))
    return x


def _unsplitmix64(z: np.ndarray) -> np.ndarray:
    """The inverse of `_splitmix64` (its multipliers are odd, so invertible modulo 2**64)."""
    with np.errstate(over="ignore"):
        z = _unxorshift(z, 31) * np.uint64(pow(_MIX2, -1, 2**64))
        z = _unxorshift(z, 27) * np.uint64(pow(_MIX1, -1, 2**64))
        return _unxorshift(z, 30) - np.uint64(_GOLDEN)


def _salt(seed: int) -> np.uint64:
    return _splitmix64(np.array([seed & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))[0]


class BadPairId(ValueError):
    """A `pair_id` that is not 16 lowercase hexadecimal characters, at `row` of `path` (or of its array)."""

    def __init__(self, row: int, value: object, path: Path | None = None) -> None:
        where = f"{path}: row {row}" if path else f"row {row}"
        expected = "16 lowercase hexadecimal characters (as the pair stage writes them)"
        super().__init__(f"{where} has pair_id {value!r}, expected {expected}")
        self.row, self.value = row, value


def _bad_pair_id(arr: pa.Array) -> BadPairId:
    """The first offending row (only on the error path, so plain Python)."""
    for row, value in enumerate(arr.to_pylist()):
        if value is None or len(value) != 16 or value.strip("0123456789abcdef"):
            return BadPairId(row, value)
    raise AssertionError("no bad pair_id")


def pair_id_values(pair_ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """16-character hex `pair_id`s as uint64: one `bytes.fromhex` over the Arrow data buffer."""
    arr = pair_ids.combine_chunks() if isinstance(pair_ids, pa.ChunkedArray) else pair_ids
    arr = arr.cast(pa.string())
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    if arr.null_count or not pc.all(pc.equal(pc.binary_length(arr), 16)).as_py():
        raise _bad_pair_id(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4)
    data = memoryview(arr.buffers()[2])[offsets[0] : offsets[0] + 16 * n]
    # Lowercase only: the shard writer rebuilds `pair_id` from the key in lowercase.
    chars = np.frombuffer(data, np.uint8)
    try:
        raw = b"" if ((chars >= ord("A")) & (chars <= ord("F"))).any() else bytes.fromhex(bytes(data).decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raw = b""
    if len(raw) != 8 * n:  # fromhex skips whitespace: a short result means a bad character
        raise _bad_pair_id(arr)
    return np.frombuffer(raw, dtype=">u8").astype(np.uint64)


def pair_ids_from_keys(keys: np.ndarray, seed: int) -> pa.StringArray:
    """The `pair_id`s (16 lowercase hex characters) whose `shuffle_keys` under `seed` are `keys`."""
    values = _unsplitmix64(np.asarray(keys, np.uint64)) ^ _salt(seed)
    raw = values.astype(">u8").view(np.uint8)
    nibbles = np.empty(2 * raw.size, np.uint8)
    nibbles[0::2], nibbles[1::2] = raw >> 4, raw & 15
    offsets = pa.py_buffer(np.arange(0, 16 * len(values) + 1, 16, dtype=np.int32))
    return pa.StringArray.from_buffers(len(values), offsets, pa.py_buffer(_HEX_DIGITS[nibbles].tobytes()))


def shuffle_keys(pair_ids: pa.Array | pa.ChunkedArray, seed: int) -> np.ndarray:
    """The seeded, version-stable shuffle key of each pair."""
    return _splitmix64(pair_id_values(pair_ids) ^ _salt(seed))


def bucket_codes(buckets: pa.Array | pa.ChunkedArray, path: Path, first_row: int) -> np.ndarray:
    """Each row's index in BUCKETS; a row of another bucket fails naming its file and row."""
    codes = np.full(len(buckets), -1, np.int8)
    for i, name in enumerate(BUCKETS):
        codes[pc.fill_null(pc.equal(buckets, name), False).to_numpy(zero_copy_only=False)] = i
    bad = np.flatnonzero(codes < 0)
    if len(bad):
        value = buckets[int(bad[0])].as_py()
        raise ValueError(
            f"{path}: row {first_row + int(bad[0])} has bucket {value!r}, expected one of {', '.join(BUCKETS)} "
            f"({len(bad)} such rows in this slice)"
        )
    return codes


def _repeated(value: str, n: int) -> pa.StringArray:
    data = value.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(data))
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data * n))


def with_derived_columns(table: pa.Table, bucket: str, schema: pa.Schema, seed: int) -> pa.Table:
    """Intermediate rows of one bucket as shard rows: `pair_id` and `bucket` restored, in `schema`'s order."""
    derived = {
        "pair_id": pair_ids_from_keys(table.column("shuffle_key").to_numpy(), seed),
        "bucket": _repeated(bucket, table.num_rows),
    }
    columns = [derived[f.name].cast(f.type) if f.name in derived else table.column(f.name) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def choose_partitions(input_bytes: int, memory_limit: str) -> int:
    """A power of two such that one partition (uncompressed) takes at most 1/16 of the limit.

    Two partitions are in memory at once (the next one loads while this one is written), with
    the gathered batches, the shards being encoded, the input slices of phase 1 (see
    `_in_flight`), memory the allocator keeps, and the interpreter's and libraries' own. At 1/16
    the process stays under the limit, where 1/8 went over it once the next partition was
    prefetched (the results log: docs/results/, the shuffle's partition share and profile; the
    shuffle against `sort -u | shuf` at 1 and 5 GB).
    """
    limit = parse_bytes(memory_limit)
    need = max(1, -(-input_bytes * PARTITION_SHARE // max(limit, 1)))
    return 1 << (need - 1).bit_length()


def disk_needed(input_bytes: int, config: ShuffleConfig, intermediate_copies: int = 1) -> int:
    """Bytes the stage writes for pairs of `input_bytes` in memory: its intermediates (the mapped
    form keeps two copies, partitioned and sorted) and the shards, which coexist at the end."""
    spill = intermediate_copies * SPILL_DISK[config.spill_compression]
    return int(input_bytes * (spill + SHARD_DISK[config.shard_compression]))


def check_disk(out_dir: Path, need: int) -> None:
    """Fail before any work when the disk under `out_dir` cannot hold `need` more bytes (what a
    resumed run already wrote counts as written), rather than on ENOSPC mid-way."""
    written = sum(p.stat().st_size for p in out_dir.rglob("*") if p.is_file()) if out_dir.exists() else 0
    existing = next(p for p in (out_dir, *out_dir.parents) if p.exists())
    free = shutil.disk_usage(existing).free
    if need - written > free:
        raise OSError(
            f"the shuffle needs about {(need - written) / 1e9:.1f} GB more disk under {existing}, "
            f"{free / 1e9:.1f} GB are free: free some space, use another data root, or pass "
            'spill_compression="lz4" (smaller temporary files, a slower stage)'
        )


def uncompressed_bytes(paths: list[Path]) -> int:
    """In-memory size of Parquet files, from their footers (no data read)."""
    total = 0
    for path in paths:
        meta = pq.ParquetFile(path).metadata
        total += sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    return total


def parse_bytes(text: str) -> int:
    """`memory_limit` in bytes: "1GB", "512MiB", "2e9"; at least MIN_MEMORY_LIMIT."""
    units = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}
    number = text.strip().upper()
    try:
        suffix = next(u for u in sorted(units, key=len, reverse=True) if number.endswith(u))
        value = int(float(number[: len(number) - len(suffix)]) * units[suffix])
    except (ValueError, OverflowError):  # OverflowError: "inf"
        raise ValueError(f"memory_limit must look like 1GB, 512MiB or a byte count, got {text!r}") from None
    if value < MIN_MEMORY_LIMIT:  # below this the partitions (and their files) run into the millions
        raise ValueError(f"memory_limit must be at least 16MB, got {text!r}")
    return value


def partition_bits(partitions: int) -> int:
    if partitions < 1 or partitions & (partitions - 1):
        raise ValueError(f"partitions must be a power of two, got {partitions}")
    return partitions.bit_length() - 1


def _threads(config: ShuffleConfig) -> int:
    return config.threads or os.cpu_count() or 1


def _in_flight(config: ShuffleConfig) -> int:
    """Input shards partitioned, or output shards encoded, at once: each holds a slice or a shard
    and its copies (docs/results/, the shuffle's partition share and profile), so two per GiB of
    the memory limit, at most one per thread."""
    return max(1, min(_threads(config), round(2 * parse_bytes(config.memory_limit) / 2**30)))


def _release_memory() -> None:
    """Give memory the Arrow allocator keeps back to the OS: a lower peak (docs/results/, the shuffle's in-memory
    sort)."""
    pa.default_memory_pool().release_unused()


@contextmanager
def _jemalloc_pool():
    """Arrow allocations on jemalloc while the stage runs, where the wheel has it: less time and
    a lower peak than on the default mimalloc (fewer pages handed back to the OS and faulted in
    again between partitions; docs/results/, the shuffle on Arrow's jemalloc pool)."""
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:
        yield
        return
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pool)
    try:
        yield
    finally:
        pa.set_memory_pool(previous)


def partitioned_dir(work: Path, partitions: int) -> Path:
    """Phase 1's files for P partitions: a rerun with another P (another memory limit) starts
    afresh instead of reading files cut for a different key range."""
    return work / f"partitioned-{INTERMEDIATE_FORMAT}-p{partitions}"


def sorted_dir(work: Path) -> Path:
    """Phase 2's files (two-phase form)."""
    return work / f"sorted-{INTERMEDIATE_FORMAT}"


def intermediate_schema(pairs: pa.Schema) -> pa.Schema:
    """Phase 1's rows: the pairs columns but the DERIVED ones, the key, and the combiner counts
    (int32: they count rows of one input slice)."""
    schema = pa.schema([f for f in pairs.remove_metadata() if f.name not in DERIVED])
    return pa.schema([*schema, ("shuffle_key", pa.uint64()), (ROWS, pa.int32()), (SAME_DOC, pa.int32())])


def partition_shard(in_path: Path, index: int, work: Path, config: ShuffleConfig, partitions: int) -> int:
    """Phase 1 for one input shard: add `shuffle_key`, write its rows grouped by partition and bucket.

    The output is one IPC file whose record batches come in groups of 2P (one group per input
    slice; batches 2p and 2p+1 of a group hold partition p's short and long rows), so phase 2
    reads only its own batches.
    """
    folder = partitioned_dir(work, partitions)
    if shard_done(folder, index):
        return 0
    folder.mkdir(parents=True, exist_ok=True)
    bits = partition_bits(partitions)
    groups = partitions * len(BUCKETS)
    source = pq.ParquetFile(in_path)
    schema = intermediate_schema(source.schema_arrow)
    if source.metadata.num_rows == 0:  # no chunk to write and read back: a folder corpus has many empty units
        _mark_partitioned(folder, index)
        return 0
    rows = 0
    with (
        atomic_path(folder / f"chunk-{index:05d}.arrow") as tmp,
        pa.ipc.new_file(tmp, schema, options=config.spill_options()) as writer,
    ):
        batches = source.iter_batches(batch_size=INPUT_SLICE_ROWS, use_threads=True)
        for batch in batches:
            try:
                keys = shuffle_keys(batch.column("pair_id"), config.seed)
            except BadPairId as bad:
                raise BadPairId(rows + bad.row, bad.value, in_path) from None
            buckets = bucket_codes(batch.column("bucket"), in_path, rows)
            table = pa.Table.from_batches([batch]).replace_schema_metadata(None)
            # Key order groups the partitions (top bits of the key) and puts duplicates side by side.
            kept, stands_for, same_doc = collapse_duplicates(table, keys)
            part = keys[kept] >> np.uint64(64 - bits) if bits else np.zeros(len(kept), np.uint64)
            group = part * np.uint64(len(BUCKETS)) + buckets[kept].astype(np.uint64)
            # Grouped, in input order within each group: the gather then reads the slice in 2P
            # forward streams (faster than in key order: docs/results/, the shuffle's partition
            # share and profile); phase 2 orders by key anyway.
            order = np.argsort((group << np.uint64(32)) | kept.astype(np.uint64))
            kept, stands_for, same_doc = kept[order], stands_for[order], same_doc[order]
            table = table.drop_columns(list(DERIVED)).take(kept)  # one gather; the slices below are zero-copy
            table = table.append_column("shuffle_key", pa.array(keys[kept], pa.uint64()))
            table = table.append_column(ROWS, pa.array(stands_for.astype(np.int32)))
            table = table.append_column(SAME_DOC, pa.array(same_doc.astype(np.int32)))
            counts = np.bincount(group.astype(np.int64), minlength=groups)
            table = table.combine_chunks()
            whole = table.to_batches()[0] if table.num_rows else pa.RecordBatch.from_pylist([], schema)
            starts = np.concatenate([[0], np.cumsum(counts)])
            for g in range(groups):
                writer.write_batch(whole.slice(int(starts[g]), int(counts[g])))
            rows += len(keys)
        if rows == 0:  # an empty input still gives one (empty) group
            empty = pa.RecordBatch.from_pylist([], schema)
            for _ in range(groups):
                writer.write_batch(empty)
    _release_memory()  # the next shard starts from a small footprint
    _mark_partitioned(folder, index)
    return rows


def _mark_partitioned(folder: Path, index: int) -> None:
    (folder / "_done").mkdir(exist_ok=True)
    (folder / "_done" / f"{index:05d}").touch()


def read_partition(work: Path, p: int, partitions: int) -> tuple[pa.Table | None, np.ndarray]:
    """All rows of partition p (input shard by input shard), and each row's index in BUCKETS."""
    batches, codes, schema = [], [], None
    groups = partitions * len(BUCKETS)
    for path in sorted(partitioned_dir(work, partitions).glob("chunk-*.arrow")):
        with pa.ipc.open_file(pa.memory_map(str(path))) as reader:
            schema = reader.schema
            if reader.num_record_batches % groups:
                raise ValueError(f"{path} was partitioned for another partition count")
            for j in range(p * len(BUCKETS), reader.num_record_batches, groups):
                for code in range(len(BUCKETS)):
                    batch = reader.get_batch(j + code)
                    if batch.num_rows:
                        batches.append(batch)
                        codes.append(np.full(batch.num_rows, code, np.int8))
    if schema is None:
        return None, np.zeros(0, np.int8)
    # One contiguous array per column: a gather over hundreds of chunks is much slower (docs/results/,
    # the shuffle's in-memory sort).
    # The batches are memory-mapped file pages, so only the copy takes heap memory.
    table = pa.Table.from_batches(batches, schema=schema).combine_chunks()
    return table, np.concatenate(codes) if codes else np.zeros(0, np.int8)


def collapse_duplicates(
    table: pa.Table, keys: np.ndarray, rows: np.ndarray | None = None, same_doc: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of each run of equal keys, the first row by (doc_id, a_sent_id, b_sent_id, row index).

    Equal keys are equal pairs. Returns the kept row indices in key order and, per kept row,
    the input rows it stands for and how many of those share its document. `rows`/`same_doc`
    are those counts for rows that already stand for others (the combiner's output; 1 if
    absent). This adds up exactly: a group collapsed earlier whose winner lost here has no
    row from the final winner's document, else that row would have won its group.
    Only rows of runs longer than one (duplicates: a few percent) go through the
    multi-column sort, the rest is one numpy argsort over the keys.
    """
    n = len(keys)
    rows = np.ones(n, np.int64) if rows is None else rows
    same_doc = np.ones(n, np.int64) if same_doc is None else same_doc
    order = np.argsort(keys)
    ordered = keys[order]
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]])) if n else np.zeros(0, np.int64)
    kept = order[starts]
    stands_for = np.add.reduceat(rows[order], starts) if n else np.zeros(0, np.int64)
    kept_same = same_doc[kept]
    lengths = np.diff(np.append(starts, n))
    multi = lengths > 1
    if multi.any():
        in_runs = np.repeat(multi, lengths)
        members = order[in_runs]
        candidates = pa.table(
            {
                "k": ordered[in_runs],
                "d": table.column("doc_id").take(members),
                "a": table.column("a_sent_id").take(members),
                "b": table.column("b_sent_id").take(members),
                "i": members,
            }
        )
        ranked = pc.sort_indices(candidates, sort_keys=[(c, "ascending") for c in "kdabi"]).to_numpy()
        run_lengths = lengths[multi]
        run_starts = np.concatenate([[0], np.cumsum(run_lengths)[:-1]])
        firsts = ranked[run_starts]
        kept[multi] = members[firsts]
        docs = candidates.column("d")
        winner_doc = docs.take(np.repeat(firsts, run_lengths))
        own_doc = pc.equal(docs.take(ranked), winner_doc).to_numpy(zero_copy_only=False)
        kept_same[multi] = np.add.reduceat(np.where(own_doc, same_doc[members[ranked]], 0), run_starts)
    return kept, stands_for, kept_same


def first_of_each_pair(table: pa.Table) -> tuple[np.ndarray, dict[str, int]]:
    """Row indices of the kept rows in `shuffle_key` order, and the duplicate counts."""
    keys = table.column("shuffle_key").to_numpy()
    counts = [table.column(c).to_numpy().astype(np.int64) for c in (ROWS, SAME_DOC)]
    kept, stands_for, same_doc = collapse_duplicates(table, keys, *counts)
    dropped = int(stands_for.sum()) - len(kept)
    same = int(same_doc.sum()) - len(kept)
    return kept, {"duplicate_same_document": same, "duplicate_across_documents": dropped - same}


def _ordered_map(pool: ThreadPoolExecutor, fn, items, ahead: int):
    """`pool.map(fn, items)` with at most `ahead` results computed but not yet consumed."""
    pending: deque = deque()
    for item in items:
        pending.append(pool.submit(fn, item))
        if len(pending) > ahead:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def dedup_partition(work: Path, p: int, partitions: int) -> tuple[pa.Table | None, dict[str, np.ndarray], dict]:
    """Partition p loaded, and per bucket the row indices to keep, in global order; plus counts."""
    table, buckets = read_partition(work, p, partitions)
    stats = {"rows_in": 0, "duplicate_same_document": 0, "duplicate_across_documents": 0}
    keep: dict[str, np.ndarray] = {}
    if table is not None and table.num_rows:
        # Across buckets: variants of one pair may fall on both sides of the length boundary.
        kept, dups = first_of_each_pair(table)
        stats |= dups | {"rows_in": len(kept) + dups["duplicate_same_document"] + dups["duplicate_across_documents"]}
        table = table.drop_columns([ROWS, SAME_DOC])
        for code, name in enumerate(BUCKETS):
            keep[name] = kept[buckets[kept] == code]
    return table, keep, stats


def _gathered(pool: ThreadPoolExecutor, table: pa.Table, rows: np.ndarray, threads: int):
    """`table.take(rows)` a batch at a time, gathered on all cores, in order: the reordered
    copy of a partition never exists whole."""
    slices = (rows[i : i + INTERMEDIATE_BATCH_ROWS] for i in range(0, len(rows), INTERMEDIATE_BATCH_ROWS))
    return _ordered_map(pool, table.take, slices, 2 * threads)


def sort_partition(p: int, work: Path, config: ShuffleConfig, partitions: int) -> dict[str, int]:
    """Phase 2 for one partition (two-phase form): dedup, order by `shuffle_key`, one IPC file per bucket."""
    done = sorted_dir(work)
    if shard_done(done, p):
        return json.loads((done / f"p-{p:05d}.json").read_text())
    done.mkdir(parents=True, exist_ok=True)
    table, keep, stats = dedup_partition(work, p, partitions)
    threads = _threads(config)
    with ThreadPoolExecutor(threads) as pool:
        for name, rows in keep.items():
            path = done / f"p-{p:05d}.{name}.arrow"
            options = config.spill_options()
            with atomic_path(path) as tmp, pa.ipc.new_file(tmp, table.schema, options=options) as writer:
                for batch in _gathered(pool, table, rows, threads):
                    writer.write_table(batch)
    stats |= {f"rows_{name}": len(keep.get(name, ())) for name in BUCKETS}
    del table
    _release_memory()
    (done / f"p-{p:05d}.json").write_text(json.dumps(stats, sort_keys=True))
    (done / "_done").mkdir(exist_ok=True)
    (done / "_done" / f"{p:05d}").touch()
    return stats


def sorted_stats(work: Path, partitions: int) -> dict[str, int]:
    """Phase 2's counts summed over partitions."""
    total: dict[str, int] = {}
    for p in range(partitions):
        for key, value in json.loads((sorted_dir(work) / f"p-{p:05d}.json").read_text()).items():
            total[key] = total.get(key, 0) + value
    return total


class ShardWriter:
    """Phase 3: each bucket's rows, fed in global order, cut into shards of `rows_per_shard`.

    Shard k of a bucket always holds rows k*rows_per_shard... of that bucket's global order,
    so finished shards (marker present) are skipped on resume and the bytes do not change.
    Rows come in the intermediate schema; shards are given back the DERIVED columns and
    encoded on the pool, a few at a time. `schema` is the shards' (None: there are no rows).
    """

    def __init__(
        self, out_dir: Path, config: ShuffleConfig, pool: ThreadPoolExecutor, threads: int, schema: pa.Schema | None
    ) -> None:
        self.out_dir, self.config, self.pool, self.threads, self.schema = out_dir, config, pool, threads, schema
        self.buffers: dict[str, list[pa.RecordBatch]] = {b: [] for b in BUCKETS}
        self.buffered = dict.fromkeys(BUCKETS, 0)
        self.rows = dict.fromkeys(BUCKETS, 0)
        self.shards = dict.fromkeys(BUCKETS, 0)
        self.fn = FalseNegativeCounter(config.batch_size, config.seed)
        self.pending: deque = deque()

    def add(self, bucket: str, rows: pa.RecordBatch | pa.Table) -> None:
        for batch in rows.to_batches() if isinstance(rows, pa.Table) else [rows]:
            self.fn.add(bucket, batch.column("doc_id"))
            self.buffers[bucket].append(batch)
        self.rows[bucket] += rows.num_rows
        self.buffered[bucket] += rows.num_rows
        while self.buffered[bucket] >= self.config.rows_per_shard:
            table = pa.Table.from_batches(self.buffers[bucket])
            rest = table.slice(self.config.rows_per_shard)
            self._submit(bucket, table.slice(0, self.config.rows_per_shard))
            self.buffers[bucket], self.buffered[bucket] = rest.to_batches(), rest.num_rows

    def _submit(self, bucket: str, table: pa.Table) -> None:
        index = self.shards[bucket]
        self.shards[bucket] += 1
        if shard_done(self.out_dir, index, bucket):
            return
        self.pending.append(self.pool.submit(self._write, bucket, index, table))
        while len(self.pending) > self.threads:
            self.pending.popleft().result()

    def _write(self, bucket: str, index: int, table: pa.Table) -> None:
        table = with_derived_columns(table.combine_chunks(), bucket, self.schema, self.config.seed)
        self._encode(bucket, index, table)

    def _encode(self, bucket: str, index: int, table: pa.Table) -> None:
        write_shard(
            self.out_dir,
            index,
            table,
            bucket,
            self.config.row_group_rows,
            dictionary=False,
            compression=self.config.shard_compression,
            statistics=[c for c in table.column_names if c not in NO_STATISTICS],
        )

    def finish(self) -> dict[str, float]:
        for bucket in BUCKETS:
            if self.buffered[bucket]:
                self._submit(bucket, pa.Table.from_batches(self.buffers[bucket]))
                self.buffers[bucket], self.buffered[bucket] = [], 0
        while self.pending:
            self.pending.popleft().result()
        for bucket in BUCKETS:
            if self.shards[bucket] == 0 and self.schema is not None:  # an empty bucket still gets one empty shard
                if not shard_done(self.out_dir, 0, bucket):
                    self._encode(bucket, 0, self.schema.empty_table())
                self.shards[bucket] = 1
        stats = {f"rows_{b}": self.rows[b] for b in BUCKETS} | {f"shards_{b}": self.shards[b] for b in BUCKETS}
        return stats | {"rows_out": sum(self.rows.values())} | self.fn.summary()


def write_bucket_shards(
    work: Path, out_dir: Path, partitions: int, config: ShuffleConfig, schema: pa.Schema | None
) -> dict[str, float]:
    """Phase 3 of the two-phase form: the sorted partitions read back in order, cut into shards."""
    threads = _threads(config)
    with ThreadPoolExecutor(threads) as pool:
        writer = ShardWriter(out_dir, config, pool, _in_flight(config), schema)
        for bucket in BUCKETS:
            for p in range(partitions):
                path = sorted_dir(work) / f"p-{p:05d}.{bucket}.arrow"
                if not path.exists():  # no pair of this bucket fell into this key range
                    continue
                with pa.ipc.open_file(pa.memory_map(str(path))) as reader:
                    for j in range(reader.num_record_batches):
                        writer.add(bucket, reader.get_batch(j))
        return writer.finish()


class FalseNegativeCounter:
    """How often a batch holds two pairs of one document (they become false negatives for
    in-batch contrastive loss), in our order and under a uniform random permutation of the
    same rows, over the first `limit` rows of each bucket."""

    def __init__(self, batch_size: int, seed: int, limit: int = 2_000_000) -> None:
        self.batch_size, self.seed, self.limit = batch_size, seed, limit
        self.docs: dict[str, list[pa.Array]] = {b: [] for b in BUCKETS}
        self.count = dict.fromkeys(BUCKETS, 0)

    def add(self, bucket: str, doc_ids: pa.Array) -> None:
        room = self.limit - self.count[bucket]
        if room > 0:
            chunk = doc_ids.slice(0, room)
            self.docs[bucket].append(chunk)
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


def shuffle_all(in_shards: list[Path], out_dir: Path, config: ShuffleConfig) -> dict[str, float]:
    """All phases in this process (the single-machine path); returns summed counts.

    Phases 2 and 3 run together: each sorted partition goes straight to the shard writer
    instead of through a file. The bytes are those of the two-phase form. A rerun skips
    partitioned input shards and finished output shards; it sorts the partitions again.
    """
    with _jemalloc_pool():
        return _shuffle_all(in_shards, out_dir, config)


def _shuffle_all(in_shards: list[Path], out_dir: Path, config: ShuffleConfig) -> dict[str, float]:
    sweep_temporaries(out_dir)
    work = out_dir / WORK_DIR
    input_bytes = uncompressed_bytes(in_shards)
    check_disk(out_dir, disk_needed(input_bytes, config))
    partitions = partitions_for(input_bytes, config)
    threads = _threads(config)
    with ThreadPoolExecutor(_in_flight(config)) as pool:  # input shards are partitioned side by side
        jobs = [pool.submit(partition_shard, path, i, work, config, partitions) for i, path in enumerate(in_shards)]
        try:
            for job in jobs:
                job.result()
        except BaseException:
            pool.shutdown(cancel_futures=True)  # report a bad shard now, not after all the others
            raise
    stats: dict[str, float] = {"partitions": partitions}
    with ThreadPoolExecutor(threads) as pool, ThreadPoolExecutor(1) as loader:
        writer = ShardWriter(out_dir, config, pool, _in_flight(config), shard_schema(in_shards))
        # The next partition is loaded and deduplicated while this one is gathered and written.
        upcoming = loader.submit(dedup_partition, work, 0, partitions)
        for p in range(partitions):
            table, keep, counts = upcoming.result()
            if p + 1 < partitions:
                upcoming = loader.submit(dedup_partition, work, p + 1, partitions)
            for key, value in counts.items():
                stats[key] = stats.get(key, 0) + value
            for name, rows in keep.items():
                for batch in _gathered(pool, table, rows, threads):
                    writer.add(name, batch)
            del table
            _release_memory()
        stats.update(writer.finish())
    return stats


def shard_schema(in_shards: list[Path]) -> pa.Schema | None:
    """The output schema: the pairs columns plus `shuffle_key`."""
    if not in_shards:
        return None
    schema = pq.read_schema(in_shards[0]).remove_metadata()
    return schema.append(pa.field("shuffle_key", pa.uint64()))


def partitions_for(input_bytes: int, config: ShuffleConfig) -> int:
    """The configured partition count, else one chosen for pairs of `input_bytes` in memory."""
    return config.partitions or choose_partitions(input_bytes, config.memory_limit)
