"""build-pairs on a real `distributed.LocalCluster` of 2 worker processes: the bytes of a local run, the same
bytes when a worker is SIGKILLed during the pair stage, and a clear error when the workers cannot see the root."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from samples.pair_corpus import part_hashes, write_corpus  # noqa: E402
from tests.helpers import REPO  # noqa: E402
from tests.helpers.gur_subprocess import SLOW_PAIR_SHARDS
from tests.helpers.shared_data import in_ci  # noqa: E402

try:
    import distributed
except ImportError as exc:  # skipped on a laptop without the extra; under CI a missing package fails
    if in_ci():
        pytest.fail(f"distributed is not installed ({exc}) (CI is set: CI must install prefect-dask)", pytrace=False)
    pytest.skip(f"distributed is not installed ({exc})", allow_module_level=True)
pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.slow]

# 600 documents, 150 per shard: 4 shards of documents, sentences and pairs; at least 3 training shards a bucket.
PARAMS = dict(docs_per_shard=150, rows_per_shard=400)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """2 worker processes, one thread each; pair shards take 0.4 s longer on them (timing only), so a kill
    lands while one runs."""
    hooks = tmp_path_factory.mktemp("hooks")
    (hooks / "sitecustomize.py").write_text(SLOW_PAIR_SHARDS, encoding="utf-8")
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(hooks), str(REPO)])  # read when a worker's Python starts
    try:
        local = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = before
    with local:
        yield local


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    from flows.build_pairs import build_pairs

    base = tmp_path_factory.mktemp("local")
    corpus = write_corpus(base / "corpus.jsonl", n_docs=600)
    refs = build_pairs(input_path=str(corpus), root=str(base / "root"), workers=1, **PARAMS)
    return corpus, refs, part_hashes(base / "root", refs)


def assert_same_build(root: Path, refs: dict, local_refs: dict, local_hashes: dict) -> None:
    assert refs == local_refs  # `dask` is in no fingerprint
    assert part_hashes(root, refs) == local_hashes
    for ref in refs.values():
        folder = root / ref["path"]
        assert (folder / "_manifest.json").exists()
        leftovers = [p for p in (folder / "_tmp").rglob("*") if p.is_file()]
        assert not leftovers and not (folder / "_work").exists(), (ref["stage"], leftovers)


def test_dask_run_writes_the_bytes_of_a_local_run(tmp_path, cluster, local_run, caplog):
    from flows.build_pairs import build_pairs

    corpus, local_refs, local_hashes = local_run
    assert len(local_hashes["split"]) == len(local_hashes["pair"]) == 4
    assert sum(name.startswith("long/") for name in local_hashes["shuffle"]) >= 3
    caplog.set_level("INFO")
    refs = build_pairs(input_path=str(corpus), root=str(tmp_path), dask=cluster.scheduler_address, **PARAMS)
    assert_same_build(tmp_path, refs, local_refs, local_hashes)
    log = caplog.text
    for line in ("split: 4/4 shards done", "pair: 1/4 shards done", "pair: 4/4 shards done", "partitions sorted"):
        assert line in log, line
    # The shards ran on the workers, not in this process.
    assert cluster.scheduler_address and "dask: scheduler" in log


@pytest.mark.soak
def test_worker_killed_during_pair_stage_same_bytes(tmp_path, cluster, local_run):
    from flows.build_pairs import build_pairs

    corpus, local_refs, local_hashes = local_run
    pair_dir = tmp_path / local_refs["pairs"]["path"]
    split_done = tmp_path / local_refs["sentences"]["path"] / "_manifest.json"  # pair shards are next
    client = distributed.Client(cluster.scheduler_address)
    killed: list[int] = []

    def kill_a_pair_worker() -> None:
        """SIGKILL a worker process while it runs a pair shard and no pair shard is finished yet."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            if split_done.exists() and not any(pair_dir.glob("_done/*")):
                busy = [w for w, keys in client.processing().items() if keys]
                if busy:
                    pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_a_pair_worker, daemon=True)
    killer.start()
    try:
        refs = build_pairs(input_path=str(corpus), root=str(tmp_path), dask=cluster.scheduler_address, **PARAMS)
    finally:
        killer.join(5)
        client.close()
    assert killed, "no pair shard was seen running"
    assert_same_build(tmp_path, refs, local_refs, local_hashes)
    cluster.wait_for_workers(2, timeout=60)  # the nanny restarted the killed worker


def test_data_root_the_workers_cannot_see_is_one_clear_error(tmp_path):
    """A worker in its own mount namespace with an empty tmpfs over the data root: it sees another filesystem."""
    from tasks.runtime.dask_cluster import DataRootNotShared, check_data_root

    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs util-linux unshare")
    root = tmp_path / "root"
    root.mkdir()
    isolate = [unshare, "-m"] if os.geteuid() == 0 else [unshare, "-rm"]
    with distributed.LocalCluster(n_workers=0, protocol="tcp", dashboard_address=None) as scheduler:
        worker_cmd = f'"{sys.executable}" -m distributed.cli.dask_worker "$0" --nthreads 1 --no-dashboard'
        script = f'mount -t tmpfs none "{root}" && exec {worker_cmd}'
        worker = subprocess.Popen([*isolate, "sh", "-c", script, scheduler.scheduler_address], cwd=REPO)
        try:
            with pytest.raises(DataRootNotShared) as error:
                check_data_root(scheduler.scheduler_address, root, wait_s=60)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(30)
    message = str(error.value)
    assert "\n" not in message and str(root) in message and "1 of 1 Dask workers" in message, message
    assert "shared filesystem" in message
    assert not (root / "_dask_check").exists()  # the marker is gone after the check


def test_dask_option_is_checked():
    from tasks.runtime.dask_cluster import dask_spec

    assert dask_spec("") == "" and dask_spec("local") == "local"
    assert dask_spec("tcp://10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    with pytest.raises(ValueError, match="tcp://host:8786"):
        dask_spec("10.0.0.5")


def test_mine_keywords_k_sweep_on_dask_gives_the_local_tables(tmp_path, cluster):
    import pyarrow.parquet as pq

    from flows.mine_keywords import mine_keywords

    corpus = write_corpus(tmp_path / "titles.jsonl", n_docs=300)
    params = dict(input_path=str(corpus), text_field="title", title_field="", ks=[3, 5], seeds=[0, 1, 2], k=4)
    local = mine_keywords(**params, root=str(tmp_path / "local"))
    on_dask = mine_keywords(**params, root=str(tmp_path / "dask"), dask=cluster.scheduler_address)
    assert on_dask == local
    hashes = part_hashes(tmp_path / "local", {"keywords": local})["keywords"]
    assert {"part-00000.parquet", "topics/part-00000.parquet", "topic_sweep/part-00000.parquet"} <= set(hashes)
    assert part_hashes(tmp_path / "dask", {"keywords": on_dask})["keywords"] == hashes
    sweep = pq.read_table(tmp_path / "dask" / on_dask["path"] / "topic_sweep" / "part-00000.parquet")
    assert sorted(zip(sweep["k"].to_pylist(), sweep["seed"].to_pylist(), strict=True)) == [
        (k, s) for k in (3, 5) for s in (0, 1, 2)
    ]


def test_evaluate_units_on_dask_give_the_local_rows(tmp_path, cluster):
    import pyarrow.parquet as pq

    from flows.evaluate import evaluate

    params = dict(models=["glove"], stackoverflow="", stsb=[], lee=True, demo_retrieval=False)
    local = evaluate(**params, root=str(tmp_path / "local"))
    on_dask = evaluate(**params, root=str(tmp_path / "dask"), dask=cluster.scheduler_address)
    assert [u["fingerprint"] for u in on_dask["units"]] == [u["fingerprint"] for u in local["units"]]

    def values(root, ref):
        table = pq.read_table(root / ref["path"] / "part-00000.parquet")
        return sorted(zip(table["metric"].to_pylist(), table["value"].to_pylist(), strict=True))

    rows = values(tmp_path / "local", local["metrics"])
    assert rows and all(v is not None for _, v in rows)
    assert values(tmp_path / "dask", on_dask["metrics"]) == rows


def test_local_cluster_workers_report_to_this_processes_prefect_api(tmp_path):
    """Else each worker would start an ephemeral Prefect server of its own (~10 s, task runs no UI shows)."""
    from prefect import flow

    from tasks.runtime.dask_cluster import dask_scheduler, prefect_api_url

    @flow
    def worker_api_urls() -> tuple[str, list[str]]:
        with dask_scheduler("local", 1, tmp_path) as address, distributed.Client(address) as client:
            return prefect_api_url(), list(client.run(lambda: os.environ.get("PREFECT_API_URL")).values())

    ours, theirs = worker_api_urls()
    assert ours.startswith("http") and theirs == [ours]
