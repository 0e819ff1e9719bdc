"""Dedup + global shuffle: our stage against `sort -u | shuf` on the same rows.

    .venv/bin/python benchmarks/shuffle.py --sizes-gb 1 5      # the issue's sizes (needs ~40 GB of disk)
    .venv/bin/python benchmarks/shuffle.py --sizes-gb 0.25     # a quick look

For each size it generates a pairs table (Parquet shards with the pair stage's columns, about
2% duplicate rows), exports the same rows as `a<TAB>b` TSV, then times
- ours: the shuffle stage (`shuffle_all`) with a 1 GiB DuckDB memory limit, in a subprocess;
- baseline: `sort -u -S 1G --parallel=<cores> pairs.tsv | shuf -o out.tsv` (GNU coreutils),
and prints wall time, rows/s, the time ratio and each side's peak resident memory.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

WORDS = np.array(
    "the of and to in is that for it as was with be by on not this are or from at which have an they were "
    "model data graph network learning training sentence encoder retrieval question paper results method "
    "模型 数据 训练 句子 检索 问题 方法 结果 网络 学习".split()
)

RUN_OURS = """
import json, resource, sys, time
from pathlib import Path
from tasks.shuffle_pairs import ShuffleConfig, shuffle_all
inputs = sorted(Path(sys.argv[1]).glob("part-*.parquet"))
t = time.perf_counter()
stats = shuffle_all(inputs, Path(sys.argv[2]), ShuffleConfig(memory_limit=sys.argv[3]), Path(sys.argv[4]))
print(json.dumps({"seconds": time.perf_counter() - t, "rows_out": stats["rows_out"], "partitions": stats["partitions"],
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def sentence_pool(rng: np.random.Generator, n: int) -> pa.Array:
    lengths = rng.integers(4, 24, size=n)
    words = WORDS[rng.integers(0, len(WORDS), size=int(lengths.sum()))]
    out, pos = [], 0
    for length in lengths:
        out.append(" ".join(words[pos : pos + length]))
        pos += length
    return pa.array(out, pa.string())


def hex_ids(values: np.ndarray) -> pa.Array:
    """uint64 -> 16-character lower-case hex strings, vectorised."""
    digits = np.frombuffer(b"0123456789abcdef", np.uint8)
    shifts = np.arange(60, -4, -4, dtype=np.uint64)
    chars = digits[((values[:, None] >> shifts) & np.uint64(15)).astype(np.intp)]
    offsets = np.arange(0, 16 * (len(values) + 1), 16, dtype=np.int32)
    return pa.StringArray.from_buffers(len(values), pa.py_buffer(offsets), pa.py_buffer(chars.tobytes()))


def generate(folder: Path, target_bytes: int, rows_per_shard: int = 1_000_000, seed: int = 0) -> int:
    """Pair shards until their Parquet size reaches `target_bytes`; returns the row count.

    Sentences come from a pool of 200k; a pair's id hashes its (unordered) pool indices, the
    way the pair stage hashes the unordered normalized texts. About 2% of rows repeat an
    earlier pair of their shard in swapped order.
    """
    from tasks.shuffle_pairs import _splitmix64

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    pool_size = 200_000
    pool = sentence_pool(rng, pool_size)
    written = rows = index = 0
    while written < target_bytes:
        n = rows_per_shard
        ia, ib = rng.integers(0, pool_size, n), rng.integers(0, pool_size, n)
        dup = np.flatnonzero(rng.random(n) < 0.02)
        src = rng.integers(0, n, size=len(dup))
        ia[dup], ib[dup] = ib[src], ia[src]
        lo, hi = np.minimum(ia, ib).astype(np.uint64), np.maximum(ia, ib).astype(np.uint64)
        ids = hex_ids(_splitmix64(lo * np.uint64(pool_size) + hi))
        docs = pa.array(np.char.add("doc-", ((index * n + np.arange(n)) // 10).astype(str)))
        table = pa.table(
            {
                "pair_id": ids,
                "doc_id": docs,
                "a_sent_id": pa.array(rng.integers(0, 50, n), pa.int32()),
                "b_sent_id": pa.array(rng.integers(50, 99, n), pa.int32()),
                "a": pool.take(pa.array(ia)),
                "b": pool.take(pa.array(ib)),
                "kind": pa.array(np.full(n, "content")),
                "lcs": pa.array(np.full(n, "the model")),
                "lcs_len": pa.array(np.full(n, 9), pa.int32()),
                "lcs_weight": pa.array(np.full(n, 30), pa.int32()),
                "bucket": pa.array(np.where(rng.random(n) < 0.3, "short", "long")),
            }
        )
        path = folder / f"part-{index:05d}.parquet"
        pq.write_table(table, path, compression="zstd")
        written += path.stat().st_size
        rows += n
        index += 1
    return rows


def export_tsv(folder: Path, path: Path) -> None:
    import duckdb

    files = [str(p) for p in sorted(folder.glob("part-*.parquet"))]
    duckdb.execute(
        f"COPY (SELECT a, b FROM read_parquet({files})) TO '{path}' "
        "(FORMAT csv, DELIMITER '\t', HEADER false, QUOTE '')"
    )


def peak_children_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def run_baseline(tsv: Path, out: Path, memory: str) -> tuple[float, float]:
    """Wall time and peak memory (GNU time) of `sort -u | shuf`."""
    cmd = f"sort -u -S {memory} --parallel={os.cpu_count()} -T {tsv.parent} {tsv} | shuf -o {out}"
    t = time.perf_counter()
    res = subprocess.run(
        ["/usr/bin/time", "-f", "%M", "bash", "-c", cmd],
        capture_output=True,
        text=True,
        env={**os.environ, "LC_ALL": "C"},
    )
    seconds = time.perf_counter() - t
    if res.returncode:
        raise RuntimeError(res.stderr)
    return seconds, int(res.stderr.strip().splitlines()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes-gb", type=float, nargs="*", default=[1, 5], help="Parquet input sizes")
    parser.add_argument("--memory-limit", default="1GiB", help="DuckDB limit for ours, sort -S for the baseline")
    parser.add_argument("--workdir", type=Path, default=None, help="where to generate (default: a temp folder)")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="gur-shuffle-bench-"))
    print(f"cores={os.cpu_count()} memory_limit={args.memory_limit} workdir={work}", flush=True)
    for size in args.sizes_gb:
        case = work / f"{size:g}GB"
        inputs = case / "pairs"
        t = time.perf_counter()
        rows = generate(inputs, int(size * 1e9))
        gen_s = time.perf_counter() - t
        tsv = case / "pairs.tsv"
        export_tsv(inputs, tsv)
        t = time.perf_counter()
        res = subprocess.run(
            [sys.executable, "-c", RUN_OURS, str(inputs), str(case / "ours"), args.memory_limit, str(case / "spill")],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
        ours = json.loads(res.stdout.strip().splitlines()[-1])
        ours_wall = time.perf_counter() - t
        base_s, base_mb = run_baseline(tsv, case / "shuffled.tsv", args.memory_limit.replace("iB", ""))
        print(
            json.dumps(
                {
                    "input_GB": round(sum(p.stat().st_size for p in inputs.glob("*.parquet")) / 1e9, 2),
                    "tsv_GB": round(tsv.stat().st_size / 1e9, 2),
                    "rows": rows,
                    "generate_s": round(gen_s, 1),
                    "ours_s": round(ours_wall, 1),
                    "ours_rows_per_s": round(rows / ours_wall),
                    "ours_peak_MB": round(ours["peak_mb"]),
                    "ours_partitions": ours["partitions"],
                    "baseline_s": round(base_s, 1),
                    "baseline_rows_per_s": round(rows / base_s),
                    "baseline_peak_MB": round(base_mb),
                    "speedup": round(base_s / ours_wall, 2),
                }
            ),
            flush=True,
        )
        shutil.rmtree(case)


if __name__ == "__main__":
    main()
