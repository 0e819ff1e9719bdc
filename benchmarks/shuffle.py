"""Dedup + global shuffle: our stage against `sort -u | shuf` on the same rows.

    .venv/bin/python benchmarks/shuffle.py --sizes-gb 1 5      # the issue's sizes (needs ~50 GB of free disk)
    .venv/bin/python benchmarks/shuffle.py --sizes-gb 0.25     # a quick look

For each size it generates a pairs table (Parquet shards with the pair stage's columns, about
2% duplicate rows), exports the same rows as `a<TAB>b` TSV (not timed), then times, `--repeat`
times each and interleaved (the medians are printed):
- ours: the shuffle stage (`shuffle_all`) with a 1 GiB memory limit, in a subprocess;
- baseline: `sort -u -S 1G --parallel=<cores> pairs.tsv | shuf -o out.tsv` (GNU coreutils,
  `LC_ALL=C`: byte order, the fast setting; a UTF-8 locale makes sort several times slower),
- bare: the floor of any shuffle, reading the same pairs Parquet with pyarrow and writing it back
  with the shards' codec (snappy) and row groups, shard by shard, nothing sorted or deduplicated;
- duckdb: the whole job in one statement (dedup on `pair_id` keeping the first row by document and
  sentence ids, `ORDER BY` a seeded hash, `COPY ... TO` Parquet, `memory_limit` = ours, all cores),
and prints wall time, rows/s, the time ratios and each side's peak memory: the largest sum of
resident memory over the whole process tree (sampled every 10 ms from /proc), and the
largest single process's `ru_maxrss`. `--sides` picks which run (default: all four).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import harness
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from harness import REPO

from storage.shards import ROW_GROUP_SIZE

WORDS = np.array(
    "the of and to in is that for it as was with be by on not this are or from at which have an they were "
    "model data graph network learning training sentence encoder retrieval question paper results method "
    "模型 数据 训练 句子 检索 问题 方法 结果 网络 学习".split()
)

RUN_OURS = """
import json, sys, time
from pathlib import Path
from tasks.shuffle.phases import ShuffleConfig, shuffle_all
inputs = sorted(Path(sys.argv[1]).glob("part-*.parquet"))
t = time.perf_counter()
stats = shuffle_all(inputs, Path(sys.argv[2]), ShuffleConfig(memory_limit=sys.argv[3]))
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "rows_out": stats["rows_out"], "partitions": stats["partitions"]}))
"""

RUN_BARE = """
import sys, time
from pathlib import Path
import pyarrow.parquet as pq
from storage.shards import ROW_GROUP_SIZE
from tasks.shuffle.phases import ShuffleConfig
out = Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
codec = ShuffleConfig().shard_compression
t = time.perf_counter()
for path in sorted(Path(sys.argv[1]).glob("part-*.parquet")):
    pq.write_table(pq.read_table(path), out / path.name, compression=codec, row_group_size=ROW_GROUP_SIZE)
print(time.perf_counter() - t)
"""

RUN_DUCKDB = """
import os, sys, time
from pathlib import Path
import duckdb
files = [str(p) for p in sorted(Path(sys.argv[1]).glob("part-*.parquet"))]
out = Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
con = duckdb.connect()
con.execute(f"SET memory_limit = '{sys.argv[3]}'")
con.execute(f"SET threads = {os.cpu_count()}")
con.execute(f"SET temp_directory = '{out / 'spill'}'")
t = time.perf_counter()
con.execute(
    f"COPY (SELECT * FROM read_parquet({files}) "
    "QUALIFY row_number() OVER (PARTITION BY pair_id ORDER BY doc_id, a_sent_id, b_sent_id) = 1 "
    f"ORDER BY hash(pair_id, 0)) TO '{out / 'shuffled.parquet'}' (FORMAT parquet, COMPRESSION snappy)"
)
print(time.perf_counter() - t)
"""
SIDES = ("ours", "bare", "duckdb", "baseline")


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
    from tasks.shuffle.phases import _splitmix64

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
        pq.write_table(table, path, compression="zstd", row_group_size=ROW_GROUP_SIZE)  # as the pair stage writes
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


def tree_rss_mb(pid: int) -> float:
    """Resident memory of `pid` and all its descendants, from /proc."""
    total, stack = 0, [pid]
    page = os.sysconf("SC_PAGE_SIZE")
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * page
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    stack.extend(int(c) for c in f.read().split())
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return total / 2**20


def measured(cmd: list[str], **kwargs) -> tuple[float, float, float, subprocess.CompletedProcess]:
    """Run `cmd` under GNU time; returns (wall seconds, peak tree RSS MB, largest ru_maxrss MB, result)."""
    peak = [0.0]
    t = time.perf_counter()
    proc = subprocess.Popen(
        ["/usr/bin/time", "-f", "maxrss_kb=%M", *cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], tree_rss_mb(proc.pid))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    seconds = time.perf_counter() - t
    sampler.join()
    res = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    if proc.returncode:
        raise RuntimeError(err)
    maxrss = [int(line.split("=")[1]) for line in err.splitlines() if line.startswith("maxrss_kb=")]
    return seconds, peak[0], maxrss[-1] / 1024, res


def run_ours(inputs: Path, out: Path, memory: str) -> tuple[float, float, float, dict]:
    shutil.rmtree(out, ignore_errors=True)
    seconds, tree_mb, max_mb, res = measured([sys.executable, "-c", RUN_OURS, str(inputs), str(out), memory], cwd=REPO)
    # The output and its `_work/` take ~6x the input: free the disk before the baseline's turn.
    shutil.rmtree(out, ignore_errors=True)
    return seconds, tree_mb, max_mb, json.loads(res.stdout.strip().splitlines()[-1])


def run_script(script: str, inputs: Path, out: Path, memory: str) -> tuple[float, float, float]:
    """The bare pass or the DuckDB statement in a subprocess: (seconds, peak tree MB, largest process MB)."""
    shutil.rmtree(out, ignore_errors=True)
    seconds, tree_mb, max_mb, _ = measured([sys.executable, "-c", script, str(inputs), str(out), memory], cwd=REPO)
    shutil.rmtree(out, ignore_errors=True)
    return seconds, tree_mb, max_mb


def run_baseline(tsv: Path, out: Path, memory: str, shuf: bool = True) -> tuple[float, float, float, int]:
    """`sort -u | shuf` with the same memory for sort's buffer and all cores (`shuf=False`: sort only).

    Returns (seconds, peak tree MB, largest process MB, output lines). `pipefail`: a sort that
    dies (say, its temporary files fill the disk) fails the run instead of feeding shuf a
    truncated stream that it shuffles quickly.
    """
    sort = f"sort -u -S {memory} --parallel={os.cpu_count()} -T {tsv.parent} {tsv}"
    cmd = f"set -o pipefail; {sort} | shuf -o {out}" if shuf else f"{sort} -o {out}"
    seconds, tree_mb, max_mb, _ = measured(["bash", "-c", cmd], env={**os.environ, "LC_ALL": "C"})
    lines = int(subprocess.run(["wc", "-l", str(out)], capture_output=True, text=True, check=True).stdout.split()[0])
    out.unlink()
    return seconds, tree_mb, max_mb, lines


def main() -> None:
    parser = harness.parser(__doc__, workdir_help="where to generate")
    parser.add_argument("--sizes-gb", type=float, nargs="*", default=[1, 5], help="Parquet input sizes")
    parser.add_argument("--memory-limit", default="1GiB", help="memory limit for ours, sort -S for the baseline")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side (medians are printed)")
    parser.add_argument("--keep", action="store_true", help="keep the generated data in --workdir for the next run")
    parser.add_argument(
        "--baseline",
        choices=["sort-shuf", "sort-only"],
        default="sort-shuf",
        help="sort-only: skip shuf, which holds the whole TSV in memory (~14 GB at 5 GB of Parquet); "
        "the time is then a lower bound of the baseline's",
    )
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES), help="what to run (default: all)")
    args = parser.parse_args()
    work, show, sizes = harness.workdir(args), harness.Lines(), []
    print(f"workdir={work}", flush=True)
    show(f"cores={os.cpu_count()} memory_limit={args.memory_limit} repeat={args.repeat}")
    for size in args.sizes_gb:
        case = work / f"{size:g}GB"
        inputs, tsv = case / "pairs", case / "pairs.tsv"
        t = time.perf_counter()
        if not (case / "rows").exists():
            shutil.rmtree(case, ignore_errors=True)
            rows = generate(inputs, int(size * 1e9))
            (case / "rows").write_text(str(rows))
        if "baseline" in args.sides and not tsv.exists():
            export_tsv(inputs, tsv)
        rows = int((case / "rows").read_text())
        gen_s = time.perf_counter() - t
        ours, base, bare, duck = [], [], [], []
        memory = args.memory_limit.replace("iB", "")
        for run in range(1, args.repeat + 1):
            if "ours" in args.sides:
                ours.append(run_ours(inputs, case / "ours", args.memory_limit))
            if "bare" in args.sides:
                bare.append(run_script(RUN_BARE, inputs, case / "bare", args.memory_limit))
            if "duckdb" in args.sides:
                duck.append(run_script(RUN_DUCKDB, inputs, case / "duckdb", memory.replace("G", "GB")))
            if "baseline" in args.sides:
                base.append(run_baseline(tsv, case / "shuffled.tsv", memory, shuf=args.baseline == "sort-shuf"))
            times = {name: round(r[-1][0], 1) for name, r in zip(SIDES, (ours, bare, duck, base), strict=True) if r}
            print(json.dumps({"run": run, **{f"{k}_s": v for k, v in times.items()}}), flush=True)
        summary = {
            "input_GB": round(sum(p.stat().st_size for p in inputs.glob("*.parquet")) / 1e9, 2),
            "rows": rows,
            "generate_s": round(gen_s, 1),
        }
        for name, runs in (("bare", bare), ("duckdb", duck)):
            if runs:
                summary[f"{name}_s"] = round(statistics.median(r[0] for r in runs), 1)
                summary[f"{name}_runs_s"] = [round(r[0], 1) for r in runs]
                summary[f"{name}_peak_tree_MB"] = round(max(r[1] for r in runs))
        if ours:
            ours_s = statistics.median(r[0] for r in ours)
            for name in ("bare", "duckdb"):
                if f"{name}_s" in summary:
                    summary[f"ours_over_{name}"] = round(ours_s / summary[f"{name}_s"], 2)
        if not (ours and base):
            sizes.append({**summary, **_ours_summary(ours, rows)})
            show(json.dumps(sizes[-1]))
            shutil.rmtree(case / "ours", ignore_errors=True)
            if not args.keep:
                shutil.rmtree(case)
            continue
        ours_s = statistics.median(r[0] for r in ours)
        base_s = statistics.median(r[0] for r in base)
        sizes.append(
            {
                **summary,
                "input_GB": round(sum(p.stat().st_size for p in inputs.glob("*.parquet")) / 1e9, 2),
                "tsv_GB": round(tsv.stat().st_size / 1e9, 2),
                "rows": rows,
                "generate_s": round(gen_s, 1),
                **_ours_summary(ours, rows),
                "ours_partitions": ours[-1][3]["partitions"],
                "baseline": args.baseline,
                "baseline_s": round(base_s, 1),
                "baseline_runs_s": [round(r[0], 1) for r in base],
                "baseline_rows_per_s": round(rows / base_s),
                "baseline_rows_out": base[-1][3],  # distinct lines: exact bytes, no normalization
                "baseline_peak_tree_MB": round(max(r[1] for r in base)),
                "baseline_peak_process_MB": round(max(r[2] for r in base)),
                "speedup": round(base_s / ours_s, 2),
            }
        )
        show(json.dumps(sizes[-1]))
        shutil.rmtree(case / "ours", ignore_errors=True)
        if not args.keep:
            shutil.rmtree(case)
    gigabytes = ", ".join(f"{size:g} GB" for size in args.sizes_gb)
    title = f"Dedup and global shuffle against {', '.join(args.sides)} at {gigabytes}"
    harness.record(args, title, show.lines, {"sizes": sizes})


def _ours_summary(ours: list, rows: int) -> dict:
    if not ours:
        return {}
    ours_s = statistics.median(r[0] for r in ours)
    return {
        "ours_s": round(ours_s, 1),
        "ours_runs_s": [round(r[0], 1) for r in ours],
        "ours_rows_per_s": round(rows / ours_s),
        "ours_peak_tree_MB": round(max(r[1] for r in ours)),
        "ours_peak_process_MB": round(max(r[2] for r in ours)),
        "rows_out": ours[-1][3]["rows_out"],
    }


if __name__ == "__main__":
    main()
