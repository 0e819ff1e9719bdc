"""Shared fixtures. Prefect and the data root point into a temp folder before anything imports
the flows, so tests never touch the user's `.prefect/` or `./data`, nor see stale cache hits."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

_SESSION_TMP = Path(tempfile.mkdtemp(prefix="gur-tests-"))
atexit.register(shutil.rmtree, _SESSION_TMP, ignore_errors=True)  # after the harness's server has stopped
os.environ["PREFECT_HOME"] = str(_SESSION_TMP / "prefect-home")
os.environ["GUR_HOME"] = str(_SESSION_TMP / "data")
os.environ["GUR_STATE_HOME"] = str(_SESSION_TMP / "gur-state")  # `gur server start` records, never the user's
os.environ["DO_NOT_TRACK"] = "1"
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.pop("PREFECT_API_URL", None)
# Under pytest-xdist (`./run.sh test` runs two workers) each worker gets an equal share of the cores for
# torch's intra-op threads, set before anything imports torch: two workers each spinning up a thread per
# core make the tiny models of the tests several times slower.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT") and "OMP_NUM_THREADS" not in os.environ:
    workers = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))


# The files that take longest, in that order, ahead of the rest (collection order otherwise): `./run.sh test`
# hands each xdist worker a whole file at a time in this order (--no-loadscope-reorder), so the run does not
# end on one worker still in a long file while the other idles.
LONG_FILES_FIRST = (
    "tests/nightly/test_nightly.py",
    "tests/models/test_tfcsg_train.py",
    "tests/nightly/test_nightly_recipe.py",
    "tests/models/test_train_loop.py",
    "tests/nightly/test_served_deployments.py",
    "tests/retention/test_gc.py",
    "tests/evaluate/test_sts_flow.py",
    "tests/data/test_dask_scale_out.py",
    "tests/models/test_train_flow.py",
    "tests/models/test_wordpiece_vocab.py",
    "tests/cli/test_cli_stop.py",
    "tests/nightly/test_grown_corpus.py",
)


def pytest_collection_modifyitems(items):
    rank = {path: i for i, path in enumerate(LONG_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: a file keeps its order


@pytest.fixture(autouse=True)
def prefect_console_outlives_capsys():
    """`gur` sets Prefect's logging up again, and its console handlers keep the stderr of that moment: run
    under `capsys`, every later test in the process would log into that test's closed buffer. Set up again
    on the stderr that is current once such a test is over."""
    yield
    import logging

    streams = [getattr(h, "stream", None) for h in logging.getLogger().handlers]
    if any(getattr(s, "closed", False) for s in streams):
        from prefect.logging.configuration import setup_logging

        setup_logging(incremental=False)


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect server for the whole run (about 15 s); request it only in flow tests."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def prefect_api_url(prefect_harness) -> str:
    """The API of the run's one temporary server, for `gur` subprocesses whose test is not about the server a
    command starts for itself: without one, each `gur` starts its own (about 13 CPU s)."""
    from prefect.settings import PREFECT_API_URL

    return str(PREFECT_API_URL.value())


@pytest.fixture(scope="session")
def migrated_prefect_db(tmp_path_factory) -> Path:
    """An empty Prefect database at the installed schema, migrated once per run (the first xdist worker to ask
    builds it under a lock in the workers' common folder). A server started under a fresh PREFECT_HOME spends
    about 14 CPU s migrating a new database: tests that give each server its own home copy this one in
    (`tests/helpers/servers.py: fresh_prefect_home`) instead; the server records the same."""
    import math
    import subprocess
    import sys

    from storage.locks import file_lock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # this run's folder, not older runs'
    home = shared / "migrated-prefect-db"
    with file_lock(shared / "migrated-prefect-db.lock", wait_s=math.inf):
        if not (home / "prefect.db").is_file():
            building = shared / f"migrated-prefect-db.{os.getpid()}"
            env = {**os.environ, "PREFECT_HOME": str(building)}
            env.pop("PREFECT_API_URL", None)
            prefect = Path(sys.executable).parent / "prefect"
            upgrade = [str(prefect), "server", "database", "upgrade", "-y"]
            subprocess.run(upgrade, env=env, check=True, capture_output=True)
            building.rename(home)  # whole or not at all: a worker never copies a half-migrated file
    return home / "prefect.db"


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for a module's tiny models: on two shared cores more threads are ~10x slower
    for such small matrices. Use with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
