"""`gur` run as a subprocess by the crash tests: `gur_env(*folders, api=None)` is its environment (the folders
and the repository on PYTHONPATH, so a `sitecustomize` in one of them loads; without `api`, no PREFECT_API_URL,
so Prefect runs ephemeral under the tests' PREFECT_HOME), `tail(log)` the end of its log for a failure message, and
`SLOW_PAIR_SHARDS` the source of a `sitecustomize` that makes each pair shard 0.4 s slower, so a kill lands
mid-stage."""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers import REPO
from tests.helpers.slow_down import slow_down

# Each pair shard takes 0.4 s longer (the pair stage is ~0.3 s without it).
SLOW_PAIR_SHARDS = slow_down("tasks.pair.shards", "pair_shard", 0.4)


def gur_env(*paths: Path, api: str | None = None) -> dict[str, str]:
    """Prefect runs on the server at `api`, else ephemeral (its own server, a child of `gur`) under the tests'
    PREFECT_HOME."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, paths), str(REPO)]), "PYTHONUNBUFFERED": "1"}
    env.pop("PREFECT_API_URL", None)
    if api:
        env["PREFECT_API_URL"] = api
    return env


def tail(log: Path) -> str:
    return log.read_text(encoding="utf-8", errors="replace")[-3000:] if log.exists() else ""
