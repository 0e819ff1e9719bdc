"""Run a per-shard worker over every unfinished shard on all cores.

Shard `i` in gives shard `i` out, so results never depend on scheduling. Workers are
spawned, not forked: forking a process that runs Prefect's and Arrow's threads can deadlock.
Worker functions live in Prefect-free modules so that spawning them stays cheap.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from storage.shards import shard_done, sweep_temporaries

Worker = Callable[[str, str, int, Any], dict[str, int]]


def map_shards(
    worker: Worker,
    in_shards: list[Path],
    out_dir: Path,
    config: Any,
    workers: int | None = None,
    on_shard: Callable[[dict[str, int]], None] | None = None,
) -> None:
    """Call `worker(in_path, out_dir, index, config)` for each shard whose marker is missing."""
    sweep_temporaries(out_dir)
    pending = [(i, p) for i, p in enumerate(in_shards) if not shard_done(out_dir, i)]
    workers = max(1, min(workers or os.cpu_count() or 1, len(pending)))
    if workers == 1:
        for i, p in pending:
            stats = worker(str(p), str(out_dir), i, config)
            if on_shard:
                on_shard(stats)
        return
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = [pool.submit(worker, str(p), str(out_dir), i, config) for i, p in pending]
        for future in as_completed(futures):
            stats = future.result()
            if on_shard:
                on_shard(stats)
