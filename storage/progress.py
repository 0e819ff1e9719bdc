"""Progress for long steps: a bar on an interactive terminal, a log line every few seconds.

It sits in the bottom layer (next to ``stage_output``, which also logs through the caller's
logger and knows Prefect only through lazy imports) so that both ``tasks/`` and ``models/``
can report progress without ``models/`` importing ``tasks/``.
"""

from __future__ import annotations

import logging
import sys
import time

from tqdm import tqdm


class Progress:
    """`update(n)` moves a tqdm bar (TTY only) and logs `desc: done/total` at most every `every_s`."""

    def __init__(self, desc: str, total: int | None, logger: logging.Logger | logging.LoggerAdapter, every_s=10.0):
        self.desc, self.total, self.logger, self.every_s = desc, total, logger, every_s
        self.done = 0
        self.started = self.last_log = time.monotonic()
        self.bar = tqdm(total=total, desc=desc, unit="it", disable=not sys.stderr.isatty(), leave=False)

    def update(self, n: int = 1, **fields: object) -> None:
        self.done += n
        self.bar.update(n)
        now = time.monotonic()
        if now - self.last_log >= self.every_s:
            self.last_log = now
            self.log(**fields)

    def log(self, **fields: object) -> None:
        rate = self.done / max(time.monotonic() - self.started, 1e-9)
        of = f"/{self.total}" if self.total is not None else ""
        extra = "".join(f", {k}={v}" for k, v in fields.items())
        self.logger.info("%s: %d%s (%.1f/s%s)", self.desc, self.done, of, rate, extra)

    def close(self, **fields: object) -> None:
        self.bar.close()
        self.log(**fields)


def current_logger(name: str) -> logging.Logger | logging.LoggerAdapter:
    """Prefect's run logger inside a flow or task run (shipped to the UI), else a plain logger."""
    try:
        from prefect.exceptions import MissingContextError
        from prefect.logging import get_run_logger

        try:
            return get_run_logger()
        except MissingContextError:
            pass
    except ImportError:
        pass
    return logging.getLogger(name)
