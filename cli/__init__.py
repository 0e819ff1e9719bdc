"""`gur`'s parts: the parser (`parser.py`, one function per command), the checks that run before Prefect is
imported (`checks.py`), the commands (`commands.py`), what they print (`output.py`) and the Prefect server
they run on (`runtime.py`). `gur_cli.main` ties them together."""

import os

# Before Prefect is imported: no telemetry, and room for a slow first ephemeral-server start.
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
