"""Progress for long steps: a bar on an interactive terminal, a log line every few seconds.

It sits in the bottom layer (next to ``stage_output``, which also logs through the caller's
logger and knows Prefect only through lazy imports) so that both ``tasks/`` and ``models/``
can report progress without ``models/`` importing ``tasks/``.
"""

from __future__ import annotations

import logging
import sys
import threading
import time

from tqdm import tqdm

LOG_EVERY_S = 10.0  # a progress line at most this often (tests set 0 to see every update)


def format_duration(seconds: float) -> str:
    """A duration as a person reads it: `42s`, `3m05s`, `2h07m`."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def eta_seconds(done: float, total: float, elapsed: float) -> float | None:
    """Time left at the rate measured so far (`done` units in `elapsed` s); None before any unit is done."""
    if done <= 0 or elapsed <= 0:
        return None
    return max(total - done, 0) * elapsed / done


def progress_line(desc: str, done: int, total: int | None, elapsed: float, unit: str = "", skipped: int = 0) -> str:
    """`pair: 57/200 documents (28%, 0.5/s, 1m54s in, ETA 4m46s)`; `skipped` units were done before
    this run (a resumed stage) and count towards `done` but not towards the rate."""
    if total is None and done == 0:  # a heartbeat of a step with nothing to count
        return f"{desc}: working ({format_duration(elapsed)} in)"
    rate = (done - skipped) / max(elapsed, 1e-9)
    of = f"/{total}" if total is not None else ""
    unit = f" {unit}" if unit else ""
    parts = [f"{done / total:.0%}"] if total else []
    parts.append(f"{rate:.1f}/s" if rate < 100 else f"{rate:,.0f}/s")
    parts.append(f"{format_duration(elapsed)} in")
    if total is not None and done < total:
        eta = eta_seconds(done - skipped, total - skipped, elapsed)
        parts.append(f"ETA {format_duration(eta)}" if eta is not None else "ETA ?")
    return f"{desc}: {done}{of}{unit} ({', '.join(parts)})"


class Progress:
    """`update(n)` moves a tqdm bar (TTY only) and logs a `progress_line` at most every `every_s`
    (default `LOG_EVERY_S`).

    `done`: units finished before this run (a resumed stage); they count towards the total, not the rate.
    `heartbeat`: also log when no update came for `every_s` (at least 1 s), so a step that is slow to
    report its first unit (a kernel compiling on a first run) is not silent.
    """

    def __init__(
        self,
        desc: str,
        total: int | None,
        logger: logging.Logger | logging.LoggerAdapter,
        every_s: float | None = None,
        unit: str = "",
        done: int = 0,
        heartbeat: bool = False,
    ):
        self.desc, self.total, self.logger, self.unit = desc, total, logger, unit
        self.every_s = LOG_EVERY_S if every_s is None else every_s
        self.done = self.skipped = done
        self.started = self.last_log = time.monotonic()
        self.bar = tqdm(
            total=total, initial=done, desc=desc, unit=unit or "it", disable=not sys.stderr.isatty(), leave=False
        )
        self._stop = threading.Event()
        if heartbeat:
            threading.Thread(target=self._beat, name=f"progress {desc}", daemon=True).start()

    def _beat(self) -> None:
        every = max(self.every_s, 1.0)
        while not self._stop.wait(every / 2):
            if time.monotonic() - self.last_log >= every:
                self.last_log = time.monotonic()
                self.log()

    def update(self, n: int = 1, **fields: object) -> None:
        self.done += n
        self.bar.update(n)
        now = time.monotonic()
        if now - self.last_log >= self.every_s:
            self.last_log = now
            self.log(**fields)

    def log(self, **fields: object) -> None:
        line = progress_line(
            self.desc, self.done, self.total, time.monotonic() - self.started, self.unit, self.skipped
        )
        extra = "".join(f", {k}={v}" for k, v in fields.items())
        self.logger.info("%s%s", line, extra)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()  # the heartbeat ends with the block, also when it raises

    def close(self, **fields: object) -> None:
        self._stop.set()
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
