"""The Prefect server a `gur` command runs its flow on, its console output, and how SIGTERM stops it."""

from __future__ import annotations

import logging
import os
from pathlib import Path


class QuietPrefectFailures(logging.Filter):
    """Keeps Prefect's failure lines (tracebacks, "Finished in state Failed") off the console, where `gur`
    prints the error once; they still reach the Prefect API and its UI. Not installed with GUR_DEBUG=1."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("prefect"):
            return True
        if record.levelno >= logging.ERROR:
            return False
        message = record.getMessage()
        return not (message.startswith("Finished in state") and ("Failed" in message or "Crashed" in message))


def quiet_prefect_console() -> None:
    """Install `QuietPrefectFailures` on Prefect's console handlers (after `import prefect` configured them)."""
    if os.environ.get("GUR_DEBUG") == "1":
        return
    from prefect.logging.handlers import PrefectConsoleHandler

    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for logger in loggers:
        for handler in getattr(logger, "handlers", []):
            if isinstance(handler, PrefectConsoleHandler) and not any(
                isinstance(f, QuietPrefectFailures) for f in handler.filters
            ):
                handler.addFilter(QuietPrefectFailures())


def use_running_server() -> None:
    """Point Prefect at the server `gur server start` started, when it is up (before Prefect is imported:
    its settings are read once). An explicit PREFECT_API_URL wins."""
    from deployments.local_server import running_server

    if not os.environ.get("PREFECT_API_URL"):
        url = running_server()
        if url:
            os.environ["PREFECT_API_URL"] = url


def start_prefect() -> None:
    """Called once a flow module is imported, before its flow runs: Prefect's failure lines off the console,
    and without a server to use, the ephemeral one started now under a lock (`deployments.local_server`)."""
    from prefect.settings import get_current_settings

    from deployments.local_server import start_ephemeral

    quiet_prefect_console()
    settings = get_current_settings()
    if not settings.api.url and settings.server.ephemeral.enabled:
        start_ephemeral(Path(settings.home))


def stop_on_sigterm() -> None:
    """SIGTERM stops a flow command the way Ctrl-C does: the running task is interrupted (the trainer finishes
    its step and saves a checkpoint), Prefect marks the runs Crashed, the ephemeral server is stopped at exit.
    While a flow runs Prefect's own handler is in front of this one, and hands the signal on to it."""
    import signal

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, handler)
