"""Run a per-shard worker over every unfinished shard on all cores.

Shard `i` in gives shard `i` out, so results never depend on scheduling. Workers are
spawned, not forked: forking a process that runs Prefect's and Arrow's threads can deadlock.
Worker functions live in Prefect-free modules so that spawning them stays cheap.

With `dask` (a scheduler address, see `tasks/runtime/dask_cluster.py`) each shard is instead a Prefect task
mapped on that cluster: the same worker function and markers, so the same bytes.

Progress within a shard: a worker takes `report`, a callable it calls with a count of units
done (documents) every so often; `map_shards` passes the counts to `on_progress` in this
process, directly or, from spawned workers, through a queue it drains while it waits.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

from storage.shards import shard_done, sweep_temporaries
from tasks.runtime.parameters import RunOptions

Report = Callable[[int], None]
# worker(in_path, out_dir, index, config, report=None) -> the shard's stats
Worker = Callable[..., dict[str, int]]

_REPORTS: Any = None  # in a spawned worker: the queue progress counts go to
# A spawned worker imports its modules and loads compiled kernels before its first shard, so
# pending input (Parquet bytes) below this per worker stays in this process: a night that brings one small file
# must not pay a pool's start-up several times over its own work. The bytes are the same either way.
MIN_BYTES_PER_WORKER = 4 << 20


def _set_reports(reports: Any) -> None:
    global _REPORTS
    _REPORTS = reports


def _run_reporting(worker: Worker, in_path: str, out_dir: str, index: int, config: Any) -> dict[str, int]:
    """In a spawned worker: the worker, with its `report` feeding the pool's queue."""
    return worker(in_path, out_dir, index, config, report=_REPORTS.put if _REPORTS is not None else None)


def _drain(reports: Any, on_progress: Report) -> None:
    while True:
        try:
            n = reports.get_nowait()
        except queue.Empty:
            return
        on_progress(n)


def map_shards(
    worker: Worker,
    in_shards: list[Path],
    out_dir: Path,
    config: Any,
    workers: int | None = None,
    on_shard: Callable[[dict[str, int]], None] | None = None,
    on_progress: Report | None = None,
    poll_s: float = 1.0,
    dask: str = RunOptions.dask,
    min_bytes_per_worker: int | None = None,
) -> None:
    """Call `worker(in_path, out_dir, index, config, report=...)` for each shard whose marker is missing
    (on the Dask scheduler at `dask` when given: `on_shard` as shards finish, no within-shard progress).
    `min_bytes_per_worker`: pending input per spawned worker (None: MIN_BYTES_PER_WORKER; 0: `workers` as
    given, by a stage that sized them itself)."""
    sweep_temporaries(out_dir)
    pending = [(i, p) for i, p in enumerate(in_shards) if not shard_done(out_dir, i)]
    if dask:
        _map_on_dask(worker, pending, len(in_shards), out_dir, config, dask, on_shard)
        return
    workers = max(1, min(workers or os.cpu_count() or 1, len(pending), worth_spawning(pending, min_bytes_per_worker)))
    if workers == 1:
        for i, p in pending:
            stats = worker(str(p), str(out_dir), i, config, report=on_progress)
            if on_shard:
                on_shard(stats)
        return
    ctx = multiprocessing.get_context("spawn")
    reports = ctx.Queue() if on_progress else None
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=_set_reports, initargs=(reports,)
    ) as pool:
        waiting = {pool.submit(_run_reporting, worker, str(p), str(out_dir), i, config) for i, p in pending}
        while waiting:
            done, waiting = wait(waiting, timeout=poll_s, return_when=FIRST_COMPLETED)
            if reports is not None:
                _drain(reports, on_progress)
            for future in done:
                stats = future.result()
                if on_shard:
                    on_shard(stats)
    if reports is not None:
        _drain(reports, on_progress)  # what was still in flight when the last worker finished
        reports.close()


def worth_spawning(pending: list[tuple[int, Path]], min_bytes: int | None = None) -> int:
    """How many spawned workers the pending shards' input size pays for (at least 1: this process)."""
    sizes = [Path(p).stat().st_size for _, p in pending if Path(p).is_file()] if min_bytes != 0 else []
    return workers_paid_for(sizes, len(pending), min_bytes)


def workers_paid_for(sizes: list[int], units: int, min_bytes: int | None = None) -> int:
    """How many spawned workers `units` pieces of work of these input sizes (bytes) pay for; at least 1."""
    min_bytes = MIN_BYTES_PER_WORKER if min_bytes is None else min_bytes
    if min_bytes <= 0:
        return max(1, units)
    return max(1, sum(sizes) // min_bytes)


def _map_on_dask(
    worker: Worker,
    pending: list[tuple[int, Path]],
    total: int,
    out_dir: Path,
    config: Any,
    address: str,
    on_shard: Callable[[dict[str, int]], None] | None,
) -> None:
    """Each pending shard as a `shard` Prefect task on the cluster; logs `stage: k/n shards` as they finish."""
    from tasks.runtime.dask_cluster import map_units, run_shard

    stage = out_dir.parent.name
    done = (lambda _, stats: on_shard(stats)) if on_shard else None
    calls = [dict(worker=worker, in_path=str(p), out_dir=str(out_dir), index=i, config=config) for i, p in pending]
    names = [f"{stage}-{i:05d}" for i, _ in pending]
    progress = stage + ": {done}/{total} shards done"
    map_units(run_shard, calls, address, names, on_done=done, progress=progress, already=total - len(pending))
    sweep_temporaries(out_dir)  # what an attempt on a lost worker left behind
