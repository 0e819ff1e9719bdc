"""Scale-out on Dask: one cluster per flow run, the shared-data-root check, units mapped as Prefect tasks.

`dask=""` changes nothing (process pools on this machine). `dask="local"` starts a
`distributed.LocalCluster` of `workers` processes (one thread each) for the run; `dask="tcp://host:8786"`
uses a running scheduler and its workers. Workers read and write the data root by path, so the root
must be the same path on every worker (a shared filesystem such as NFS): `dask_scheduler` checks that
every worker sees a marker written under it before any stage runs, and names the path when one does not.

Units (a shard, a GSDMM fit, an evaluation) run as Prefect tasks on prefect-dask's `DaskTaskRunner`,
so they show in the Prefect UI; a worker that dies mid-unit has its unit rerun elsewhere by Dask, and
a unit that raises is retried by Prefect. Shard `i` in gives shard `i` out and markers make reruns skip
finished shards, so the bytes never depend on which worker ran what.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prefect import Task, task
from prefect.cache_policies import NO_CACHE

from storage.atomic import atomic_write_text
from storage.shards import STATS_DIR, shard_done

LOCAL = "local"
CHECK_DIR = "_dask_check"  # markers of the data-root check, removed right after it
WORKER_WAIT_S = 60.0


class DataRootNotShared(RuntimeError):
    """A Dask worker cannot see the data root at the path the flow uses."""


def dask_spec(value: str | None) -> str:
    """`""` (no Dask), `"local"` or a scheduler address; anything else is a one-line error."""
    value = (value or "").strip()
    if value in ("", LOCAL) or "://" in value:
        return value
    raise ValueError(
        f"--dask {value!r}: give no value for a local cluster, or a scheduler address like tcp://host:8786"
    )


def _sees_marker(marker: str, token: str) -> str:
    """On a worker: "" when the marker holds the token and its folder is writable, else why not."""
    path = Path(marker)
    try:
        if path.read_text() != token:
            return f"{path} holds another run's token"
    except OSError as exc:
        return f"cannot read {path} ({exc.strerror or type(exc).__name__})"
    if not os.access(path.parent.parent, os.W_OK):
        return f"{path.parent.parent} is not writable"
    return ""


def check_data_root(address: str, root: Path, wait_s: float = WORKER_WAIT_S) -> int:
    """Every worker of the scheduler at `address` must see `root` (a marker written here, read there);
    returns the number of workers, raises `DataRootNotShared` naming the path otherwise."""
    from distributed import Client
    from distributed.exceptions import WorkerStartTimeoutError

    token = uuid.uuid4().hex
    marker = root / CHECK_DIR / token
    marker.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(marker, token)
    try:
        with Client(address, timeout=wait_s) as client:
            try:
                client.wait_for_workers(1, timeout=wait_s)
            except WorkerStartTimeoutError:
                raise RuntimeError(f"Dask scheduler {address}: no worker arrived within {wait_s:.0f} s") from None
            seen = client.run(_sees_marker, str(marker), token)
    finally:
        marker.unlink(missing_ok=True)
        try:
            marker.parent.rmdir()
        except OSError:
            pass  # another run's check is in progress
    blind = {w: why for w, why in seen.items() if why}
    if blind:
        worker, why = sorted(blind.items())[0]
        raise DataRootNotShared(
            f"data root {root} is not visible to {len(blind)} of {len(seen)} Dask workers "
            f"(worker {worker}: {why}); every worker needs the same path on a shared filesystem"
        )
    return len(seen)


def prefect_api_url() -> str:
    """The API this process talks to, an ephemeral server's included: local workers report there instead of
    each starting an ephemeral server of its own (a wait in each worker's first stage, and task runs the flow's UI
    never shows)."""
    try:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            return str(client.api_url)
    except Exception:  # no Prefect API at all: the workers' own settings decide
        return ""


@contextmanager
def dask_scheduler(spec: str, workers: int, root: Path) -> Iterator[str]:
    """The scheduler address for a run (`""` without Dask), its data root checked on every worker; a local
    cluster lives as long as the `with` block."""
    spec = dask_spec(spec)
    log = logging.getLogger(__name__)
    if not spec:
        yield ""
        return
    if spec != LOCAL:
        n = check_data_root(spec, root)
        log.info("dask: scheduler %s, %d workers see %s", spec, n, root)
        yield spec
        return
    from distributed import LocalCluster

    # The scheduler runs in this process: its per-client lines would drown the stages' progress.
    for name in ("distributed", "prefect.task_runner.dask"):
        logging.getLogger(name).setLevel(logging.WARNING)
    n = max(1, workers or os.cpu_count() or 1)
    started = time.time()
    env = {"PREFECT_API_URL": url} if (url := prefect_api_url()) else {}
    with LocalCluster(
        n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.ERROR, env=env
    ) as cluster:
        check_data_root(cluster.scheduler_address, root)
        took = time.time() - started
        log.info("dask: local cluster of %d workers at %s (%.1f s)", n, cluster.scheduler_address, took)
        yield cluster.scheduler_address


@task(name="shard", retries=2, retry_delay_seconds=1, cache_policy=NO_CACHE, persist_result=False)
def run_shard(worker: Callable[..., dict[str, int]], in_path: str, out_dir: str, index: int, config: Any) -> dict:
    """One shard's worker on a Dask worker; a shard an earlier attempt finished is not redone."""
    if shard_done(Path(out_dir), index):
        stats = Path(out_dir) / STATS_DIR / f"{index:05d}.json"
        return json.loads(stats.read_text()) if stats.exists() else {}
    return worker(in_path, out_dir, index, config)


def map_units(
    unit: Task,
    calls: list[dict[str, Any]],
    address: str,
    names: list[str] | None = None,
    on_done: Callable[[int, Any], None] | None = None,
    progress: str = "",
    already: int = 0,
) -> list[Any]:
    """Run `unit(**calls[i])` for every i as Prefect tasks on the Dask scheduler at `address`;
    `on_done(i, result)` as each completes (in completion order); returns results in call order.
    `progress` (e.g. "pair: {done}/{total} shards done") is logged as each completes, counting `already`
    units finished before this call."""
    from prefect.futures import as_completed
    from prefect_dask import DaskTaskRunner

    from storage.progress import current_logger

    logger = current_logger(__name__)
    results: list[Any] = [None] * len(calls)
    with DaskTaskRunner(address=address) as runner:
        futures = {}
        for i, params in enumerate(calls):
            named = unit.with_options(task_run_name=names[i]) if names else unit
            futures[runner.submit(named, params)] = i
        for done, future in enumerate(as_completed(list(futures)), already + 1):
            i = futures[future]
            results[i] = future.result()
            if progress:
                logger.info(progress.format(done=done, total=already + len(calls)))
            if on_done:
                on_done(i, results[i])
    return results


def wait_logging(futures: list, what: str) -> list[Any]:
    """Results of Prefect futures (any task runner) in submission order, logging `what: k/n` as each completes."""
    from prefect.futures import as_completed

    from storage.progress import current_logger

    logger = current_logger(__name__)
    index = {id(f): i for i, f in enumerate(futures)}
    results: list[Any] = [None] * len(futures)
    for k, future in enumerate(as_completed(list(futures)), 1):
        results[index[id(future)]] = future.result()
        logger.info("%s %d/%d", what, k, len(futures))
    return results
