"""The current model of a data root: the champion pointer, its history, the gate and the promotions table.

    <root>/models/champion.json             the promoted model (replaced atomically: temp file + os.replace)
    <root>/models/history/NNNNNN.json       every champion ever promoted, in order (rollback walks back here)
    <root>/models/promotions/part-*.parquet one row per decision (a `promotions` catalog view)
    <root>/models/nightly.lock              held by the running nightly-retrain (fcntl lock, released on exit)

The gate is a pure function: promote iff the primary metric beats the champion's by at least the
margin and no guard metric drops by more than its allowance; a missing metric refuses.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from storage.atomic import atomic_path, atomic_write_json
from storage.layout import MANIFEST

PROMOTION_SCHEMA = pa.schema(
    [
        ("created_at", pa.timestamp("us", tz="UTC")),
        ("decision", pa.string()),  # promoted | refused | nothing-new | manual | rollback
        ("reason", pa.string()),
        ("candidate", pa.string()),
        ("champion", pa.string()),
        ("candidate_metrics", pa.string()),  # JSON: metric -> value
        ("champion_metrics", pa.string()),
        ("flow_run", pa.string()),
    ]
)


class NightlyBusy(RuntimeError):
    """Another nightly-retrain run holds the data root's lock."""


def models_dir(root: Path) -> Path:
    return Path(root) / "models"


def read_champion(root: Path) -> dict | None:
    path = models_dir(root) / "champion.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def history(root: Path) -> list[dict]:
    """Every champion promoted so far, oldest first."""
    folder = models_dir(root) / "history"
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("[0-9]*.json"))]


def set_champion(root: Path, pointer: dict) -> dict:
    """Append `pointer` to the history, then point champion.json at it (both atomic)."""
    number = len(history(root)) + 1
    pointer = {**pointer, "number": number, "promoted_at": time.time()}
    atomic_write_json(models_dir(root) / "history" / f"{number:06d}.json", pointer, fsync=True)
    atomic_write_json(models_dir(root) / "champion.json", pointer, fsync=True)
    return pointer


def rollback(root: Path) -> tuple[dict, dict]:
    """Point champion.json at the champion before the current one; returns (previous, restored)."""
    current = read_champion(root)
    if current is None:
        raise ValueError(f"{models_dir(root)}: no champion to roll back")
    older = [p for p in history(root) if p["number"] < current["number"]]
    if not older:
        raise ValueError(f"{models_dir(root)}: champion #{current['number']} is the first; nothing to roll back to")
    restored = older[-1]
    atomic_write_json(models_dir(root) / "champion.json", restored, fsync=True)
    return current, restored


def record_decision(root: Path, row: dict[str, Any]) -> Path:
    """One Parquet file per decision, plus a manifest so the catalog shows them as the `promotions` view."""
    folder = models_dir(root) / "promotions"
    folder.mkdir(parents=True, exist_ok=True)
    full = {name: row.get(name) for name in PROMOTION_SCHEMA.names}
    full["created_at"] = datetime.fromtimestamp(full["created_at"] or time.time(), tz=UTC)
    for key in ("candidate_metrics", "champion_metrics"):
        if not isinstance(full[key], str):
            full[key] = json.dumps(full[key] or {}, sort_keys=True)
    table = pa.Table.from_pylist([full], schema=PROMOTION_SCHEMA)
    path = folder / f"part-{time.time_ns()}.parquet"
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
    atomic_write_json(
        folder / MANIFEST,
        {"stage": "promotions", "tables": {"promotions": "part-*.parquet"}, "finished_at": time.time()},
    )
    return path


@dataclass(frozen=True)
class Decision:
    promote: bool
    reason: str


def gate(
    candidate: dict[str, float], champion: dict[str, float], primary: str, margin: float, guards: dict[str, float]
) -> Decision:
    """Promote iff candidate[primary] >= champion[primary] + margin and no guard drops by more than allowed."""
    for name in (primary, *guards):
        missing = [who for who, values in (("candidate", candidate), ("champion", champion)) if name not in values]
        if missing:
            return Decision(False, f"{name} was not measured for the {' and '.join(missing)}")
    gain = candidate[primary] - champion[primary]
    if gain < margin:
        return Decision(
            False, f"{primary} {candidate[primary]:.4f} vs {champion[primary]:.4f}: gain {gain:+.4f} < {margin}"
        )
    for name, allowed in guards.items():
        drop = champion[name] - candidate[name]
        if drop > allowed:
            return Decision(
                False, f"guard {name} drops {drop:.4f} ({champion[name]:.4f} -> {candidate[name]:.4f}) > {allowed}"
            )
    return Decision(
        True,
        f"{primary} {candidate[primary]:.4f} vs {champion[primary]:.4f} (gain {gain:+.4f} >= {margin}); guards hold",
    )


@contextmanager
def root_lock(root: Path, owner: str):
    """Hold `<root>/models/nightly.lock` for the block; a second holder gets NightlyBusy at once, naming the first.

    An OS lock (flock): it is released when the holder exits or is killed, so a crashed run never
    leaves a stale lock behind.
    """
    path = models_dir(root) / "nightly.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            held_by = handle.read().strip() or "another process"
            raise NightlyBusy(f"{path} is held by {held_by}: one nightly-retrain at a time per data root") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{owner} (pid {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S')})\n")
        handle.flush()
        yield
    finally:
        handle.close()  # closing drops the lock
