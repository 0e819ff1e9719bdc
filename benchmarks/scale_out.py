"""build-pairs on one machine against build-pairs on a Dask cluster of 1, 2, ... workers.

    .venv/bin/python benchmarks/scale_out.py                        # ~200 MB en+zh corpus, 1 and 2 workers
    .venv/bin/python benchmarks/scale_out.py --size-mb 20 --workers 1 2 4

Generates the corpus of `benchmarks/ingest_split.py` (half English, half Chinese documents),
then runs the `build-pairs` flow on a fresh data root for each setting:
- `local`: the default path (split and pair on a spawned process pool of all cores, shuffle in-process);
- `dask N`: a `distributed.LocalCluster` of N single-threaded worker processes, started and warmed up
  (Prefect and the stage modules imported) before the run, so neither is in the stage times (both are
  printed), passed as `dask=<address>`. The local pool's process spawns are in its stage times.
Prints each stage's wall time (its manifest's `finished_at - started_at`), the speed-up of the
split + pair + shuffle stages over `local`, the peak resident memory of each Dask worker
(VmHWM, read on the worker after the run) and checks that every run wrote the same bytes.
Ingest reads the input once, streaming, in the flow's process in every setting.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import harness
from ingest_split import generate

from samples.pair_corpus import part_hashes

STAGES = ("documents", "sentences", "pairs", "shards")
MAPPED = ("sentences", "pairs", "shards")  # the stages Dask runs


def peak_rss_mb() -> float:
    """This process's own peak (VmHWM): `ru_maxrss` carries the spawning process's peak over fork and exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def stage_seconds(root: Path, refs: dict) -> dict[str, float]:
    from storage.stage_output import ref_manifest

    return {name: ref_manifest(root, ref)["timings"]["total_s"] for name, ref in refs.items() if name in STAGES}


def warm_up() -> None:
    """On a worker: the imports its first task would pay (Prefect ~4 s, the stage modules, numba kernels' cache)."""
    import prefect.task_engine  # noqa: F401

    import tasks.pair.shards  # noqa: F401
    import tasks.shuffle.phases  # noqa: F401
    import tasks.split.sentences  # noqa: F401


def api_url() -> str:
    from prefect import flow

    from tasks.runtime.dask_cluster import prefect_api_url

    return flow(name="api-url")(prefect_api_url)()


def run(corpus: Path, root: Path, docs_per_shard: int, dask: str = "") -> tuple[dict, float]:
    from flows.build_pairs import build_pairs

    started = time.perf_counter()
    refs = build_pairs(input_path=str(corpus), root=str(root), docs_per_shard=docs_per_shard, dask=dask)
    return refs, time.perf_counter() - started


def main() -> None:
    parser = harness.parser(__doc__, workdir_help="holds each run's corpus and data roots (fresh ones each run)")
    parser.add_argument("--size-mb", type=float, default=200.0, help="generated corpus size (default: 200)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="Dask worker counts (default: 1 2)")
    parser.add_argument("--docs-per-shard", type=int, default=2000, help="documents per shard (default: 2000)")
    args = parser.parse_args()

    from distributed import Client, LocalCluster

    show = harness.Lines()
    with tempfile.TemporaryDirectory(prefix="gur-scale-", dir=harness.workdir(args)) as tmp:
        work = Path(tmp)
        corpus = work / "corpus.jsonl"
        n_docs = generate(corpus, args.size_mb)
        size_mb = corpus.stat().st_size / 1e6
        show(f"corpus: {size_mb:.1f} MB, {n_docs:,} documents, {args.docs_per_shard} per shard")
        rows = []
        refs, wall = run(corpus, work / "local", args.docs_per_shard)
        reference = part_hashes(work / "local", refs)
        rows.append({"setting": "local", "wall_s": wall, **stage_seconds(work / "local", refs), "worker_mb": []})
        for n in args.workers:
            root = work / f"dask-{n}"
            started = time.perf_counter()
            # The workers report to this process's Prefect API, as `dask="local"` arranges (else each starts its own).
            env = {"PREFECT_API_URL": api_url()}
            with LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None, env=env
            ) as cluster:
                with Client(cluster.scheduler_address) as client:
                    client.run(warm_up)
                    show(f"dask {n}: cluster started and warmed up in {time.perf_counter() - started:.1f} s")
                    refs, wall = run(corpus, root, args.docs_per_shard, dask=cluster.scheduler_address)
                    worker_mb = sorted(client.run(peak_rss_mb).values())
            same = part_hashes(root, refs) == reference
            rows.append({"setting": f"dask {n}", "wall_s": wall, **stage_seconds(root, refs), "worker_mb": worker_mb})
            if not same:
                print(f"dask {n}: OUTPUT DIFFERS from the local run", file=sys.stderr)
                sys.exit(1)
        shard_counts = {k: len(v) for k, v in reference.items()}

    base = sum(rows[0][s] for s in MAPPED)
    show(f"part files per stage: {shard_counts}; every setting wrote the same bytes")
    header = ("setting", "ingest", "split", "pair", "shuffle", "mapped", "speed-up", "peak MB/worker")
    show("| " + " | ".join(header) + " |", "|---" * len(header) + "|")
    for r in rows:
        mapped = sum(r[s] for s in MAPPED)
        show(
            f"| {r['setting']} | {r['documents']:.1f} | {r['sentences']:.1f} | {r['pairs']:.1f} | {r['shards']:.1f} | "
            f"{mapped:.1f} | {base / mapped:.2f}x | {', '.join(f'{m:.0f}' for m in r['worker_mb']) or '-'} |"
        )
    show(f"flow process peak RSS {peak_rss_mb():.0f} MB (wall seconds of each stage from its manifest)")
    print(json.dumps(rows))
    workers = ", ".join(map(str, args.workers))
    title = f"build-pairs local against Dask ({workers} workers) on {size_mb:.0f} MB"
    harness.record(args, title, show.lines, {"corpus_mb": size_mb, "documents": n_docs, "rows": rows})


if __name__ == "__main__":
    main()
