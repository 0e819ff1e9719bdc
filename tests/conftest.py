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
os.environ["DO_NOT_TRACK"] = "1"
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.pop("PREFECT_API_URL", None)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect server for the whole run (about 15 s); request it only in flow tests."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield
