"""The current model of a data root: the champion pointer, its history, the start model, the promotions table
and the root lock. The gate that decides a night's promotion is tasks/nightly/gate.py.

    <root>/models/champion.json             the promoted model (replaced atomically: temp file + os.replace,
                                            then the folder fsynced)
    <root>/models/history/NNNNNN.json       every champion ever promoted, in order; each names the champion it
                                            replaced (`previous`), which is where rollback goes back to
    <root>/models/rolled_back.json          exports taken back by `gur rollback`: never promoted again by a
                                            night, only by hand (`gur promote`, recorded)
    <root>/models/promotions/part-*.parquet one row per decision (a `promotions` catalog view)
    <root>/models/nightly.lock              held by the night, `gur promote` and `gur rollback` (fcntl lock,
                                            released on exit)

History numbers are allocated atomically (a hard link that fails when the number is taken), so two
writers never overwrite one file. The promotions table gains columns by adding them to
PROMOTION_SCHEMA: `record_decision` is its only writer, and the catalog reads its files by column
name, so older rows show NULL in newer columns.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from storage.atomic import atomic_path, atomic_write_json
from storage.layout import MANIFEST, record_path, record_paths, recorded_path, recorded_paths
from storage.locks import file_lock

PROMOTION_SCHEMA = pa.schema(
    [
        ("created_at", pa.timestamp("us", tz="UTC")),
        ("decision", pa.string()),  # promoted | refused | nothing-new | manual | rollback | failed
        ("reason", pa.string()),
        ("candidate", pa.string()),
        ("champion", pa.string()),
        ("candidate_metrics", pa.string()),  # JSON: metric -> value
        ("champion_metrics", pa.string()),
        ("flow_run", pa.string()),
        # added later: older rows read NULL here
        ("primary_metric", pa.string()),
        ("gain", pa.float64()),  # candidate - champion on the primary metric, mean over the suite's queries
        ("gain_low", pa.float64()),  # its bootstrap interval at `confidence`
        ("gain_high", pa.float64()),
        ("p_value", pa.float64()),  # one-sided paired permutation test
        ("confidence", pa.float64()),
        ("queries", pa.int64()),
        ("suite_fingerprint", pa.string()),  # of the texts the primary metric scored
        # queries left out of the paired test: the candidate trained on their texts (tasks/nightly/fair_queries.py)
        ("overlap", pa.int64()),
        ("error", pa.string()),  # a failed night's error
        # what the night's data stages found and did (`tasks/nightly/report.py: night_data`)
        ("files_new", pa.int64()),
        ("files_changed", pa.int64()),
        ("files_removed", pa.int64()),
        ("documents_new", pa.int64()),
        ("documents_removed", pa.int64()),
        ("rejects_new", pa.int64()),
        ("recomputed", pa.string()),  # each stage: built (and what it computed or reused) or cached
        ("suite", pa.string()),  # what the gate scored: stackoverflow-holdout, heldout-title, ..., or named: NAME
        ("gc", pa.string()),  # the night's retention: what it deleted and freed, or why it did not run
        ("gc_freed_bytes", pa.int64()),
        ("embedded", pa.string()),  # the night's embed: re-embedded for a new champion, new files only, up to date
        ("plan", pa.string()),  # JSON: the budget's plan before training (tasks/nightly/budget.py: Plan.record)
        ("actual", pa.string()),  # JSON: seconds the night's parts took, against the plan
        ("overlap_texts", pa.int64()),  # the suite's distinct texts the candidate trained on
        ("overlap_sample", pa.string()),  # JSON: a few of them
    ]
)


class NightlyBusy(RuntimeError):
    """Another nightly-retrain run holds the data root's lock."""


def models_dir(root: Path) -> Path:
    return Path(root) / "models"


PATH_KEYS = ("export", "config")  # what a champion record names by path: relative to the root when under it


def _here(root: Path, pointer: dict) -> dict:
    """A champion record with its paths absolute, where they are now (a record names them relative to the root;
    one written before records were relative names them where the root was then)."""
    return recorded_paths(root, pointer, PATH_KEYS)


def _recorded(root: Path, pointer: dict) -> dict:
    """A champion record as it is written: its paths under the root relative to it."""
    return record_paths(root, pointer, PATH_KEYS)


def read_champion(root: Path) -> dict | None:
    path = models_dir(root) / "champion.json"
    return _here(root, json.loads(path.read_text(encoding="utf-8"))) if path.exists() else None


def record_start(root: Path, export: str, config: str = "") -> dict:
    """Record the model in use before any promotion: the start model a night trains its first candidate from
    (`models/start.json`). Written when it changes; `gur models`, `gur embed`, search and the page read it."""
    path = models_dir(root) / "start.json"
    current = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    if recorded_path(root, current.get("export")) != export:
        current = _recorded(root, {"export": export, "config": config, "recorded_at": time.time()})
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, current, fsync=True)
    return _here(root, current)


def read_start(root: Path) -> dict | None:
    path = models_dir(root) / "start.json"
    return _here(root, json.loads(path.read_text(encoding="utf-8"))) if path.exists() else None


def history(root: Path) -> list[dict]:
    """Every champion promoted so far, oldest first."""
    folder = models_dir(root) / "history"
    return [_here(root, json.loads(p.read_text(encoding="utf-8"))) for p in sorted(folder.glob("[0-9]*.json"))]


def _fsync_dir(folder: Path) -> None:
    """A rename is durable once its folder is on disk."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _point_at(root: Path, pointer: dict) -> None:
    atomic_write_json(models_dir(root) / "champion.json", _recorded(root, pointer), fsync=True)
    _fsync_dir(models_dir(root))


def _new_history_entry(root: Path, pointer: dict) -> dict:
    """Write `pointer` as the next history number. The file is linked into place, which fails when the
    number is taken (by another writer): the next number is tried, no entry is ever overwritten."""
    folder = models_dir(root) / "history"
    folder.mkdir(parents=True, exist_ok=True)
    number = max((int(p.stem) for p in folder.glob("[0-9]*.json")), default=0) + 1
    while True:
        entry = {**_recorded(root, pointer), "number": number, "promoted_at": time.time()}
        staged = folder / f".{number:06d}.{os.getpid()}.{time.time_ns()}.json"
        with open(staged, "w", encoding="utf-8") as f:
            f.write(json.dumps(entry, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(staged, folder / f"{number:06d}.json")
        except FileExistsError:
            number += 1
            continue
        finally:
            staged.unlink()
        _fsync_dir(folder)
        return _here(root, entry)


def set_champion(root: Path, pointer: dict) -> dict:
    """Append `pointer` to the history (naming the champion it replaces), then point champion.json at it."""
    current = read_champion(root)
    entry = _new_history_entry(root, {**pointer, "previous": current["number"] if current else None})
    _point_at(root, entry)
    return entry


def rolled_back(root: Path) -> dict[str, dict]:
    """export -> the rollback that took it back, for exports no night may promote again."""
    path = models_dir(root) / "rolled_back.json"
    marks = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    return {recorded_path(root, export): mark for export, mark in marks.items()}


def write_rolled_back(root: Path, marks: dict[str, dict]) -> None:
    atomic_write_json(
        models_dir(root) / "rolled_back.json", {record_path(root, k): v for k, v in marks.items()}, fsync=True
    )


def rollback(root: Path, require_model: bool = False) -> tuple[dict, dict]:
    """Point champion.json at the current champion's recorded predecessor and mark the current export as
    rolled back (no night promotes it again); returns (previous, restored). `require_model`: refuse when the
    predecessor's model folder is gone (`gur rollback`: nothing is changed then)."""
    current = read_champion(root)
    if current is None:
        raise ValueError(f"{models_dir(root)}: no champion to roll back")
    if current.get("previous") is None:
        raise ValueError(f"{models_dir(root)}: champion #{current['number']} is the first; nothing to roll back to")
    restored = next((p for p in history(root) if p["number"] == current["previous"]), None)
    if restored is None:
        raise ValueError(f"{models_dir(root)}: champion #{current['number']}'s predecessor is missing from history")
    export = Path(restored["export"])
    if require_model and not (export / "modules.json").exists() and not (export / "config.json").exists():
        raise ValueError(
            f"champion #{current['number']}'s predecessor #{restored['number']} has no model at {export} any more"
            " (its weights were deleted: by hand, or by a gc whose keep_champions did not reach it);"
            " `gur promote MODEL_FOLDER` makes another model the champion"
        )
    marks = {**rolled_back(root), current["export"]: {"number": current["number"], "at": time.time()}}
    write_rolled_back(root, marks)
    _point_at(root, restored)
    return current, restored


def is_run_folder(folder: Path) -> bool:
    """A training run's folder (`train/<fp>`: export, checkpoints, a manifest of stage `train`), also once gc
    pruned its weights."""
    if (folder / "export").is_dir() or (folder / "checkpoints").is_dir():
        return True
    try:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8")).get("stage") == "train"
    except (OSError, ValueError, AttributeError):
        return False


def promote_by_hand(root: Path, export: Path, reason: str = "", then: Callable[[Path], str] | None = None) -> dict:
    """`gur promote`: make a model folder the champion under the root lock, recorded as `manual` (a rolled-back
    export may come back this way, and a night may then keep it). `then(root)` runs under the same lock, its line
    in the returned pointer's `["search"]` (the CLI's: search follows the champion, tasks/embed/outputs.py)."""
    export = Path(export).resolve()
    if is_run_folder(export):  # its config.json is the training's, not a model's
        run = f"{export} is a training run's folder"
        if (export / "export").is_dir():
            raise ValueError(f"{run}, not a model: promote its export, {export / 'export'}")
        raise ValueError(f"{run}, and its weights were deleted (gur gc): there is no model to promote")
    if not (export / "modules.json").exists() and not (export / "config.json").exists():
        raise FileNotFoundError(f"{export}: not a model folder (no modules.json or config.json)")
    with root_lock(root, "gur promote"):
        before = read_champion(root)
        pointer = set_champion(root, {"export": str(export), "method": "manual", "metrics": {}})
        marks = rolled_back(root)
        if marks.pop(str(export), None) is not None:
            write_rolled_back(root, marks)
        record_decision(
            root,
            {
                "decision": "manual",
                "reason": reason or "promoted by hand (gur promote)",
                "candidate": str(export),
                "champion": before["export"] if before else None,
            },
        )
        pointer = {**pointer, "search": then(root) if then else ""}  # under the lock: no night or gc between
    return pointer


def roll_back(root: Path, then: Callable[[Path], str] | None = None) -> tuple[dict, dict]:
    """`gur rollback`: `rollback` under the root lock, recorded; `then(root)` runs under the same lock, its line
    in `restored["search"]`, as for `promote_by_hand`."""
    with root_lock(root, "gur rollback"):
        current, restored = rollback(root, require_model=True)
        record_decision(
            root,
            {
                "decision": "rollback",
                "reason": f"champion #{current['number']} rolled back to #{restored['number']}",
                "candidate": restored["export"],
                "champion": current["export"],
            },
        )
        restored = {**restored, "search": then(root) if then else ""}  # after the record: a kill keeps the row
    return current, restored


def record_decision(root: Path, row: dict[str, Any]) -> Path:
    """One Parquet file per decision, plus a manifest so the catalog shows them as the `promotions` view."""
    folder = models_dir(root) / "promotions"
    folder.mkdir(parents=True, exist_ok=True)
    full = {name: row.get(name) for name in PROMOTION_SCHEMA.names}
    for key in ("candidate", "champion"):  # models under the root: relative to it, as every record
        full[key] = record_path(root, full[key])
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


def amend_decision(path: Path, fields: dict[str, Any]) -> None:
    """Set `fields` of the decision row at `path` (what `record_decision` returned), renamed into place: a night
    records its decision before its re-embedding and adds what the embedding did when it ends."""
    row = pq.read_table(path).to_pylist()[0]
    row.update({name: value for name, value in fields.items() if name in PROMOTION_SCHEMA.names})
    with atomic_path(path) as tmp:
        pq.write_table(pa.Table.from_pylist([row], schema=PROMOTION_SCHEMA), tmp)


@contextmanager
def root_lock(root: Path, owner: str):
    """Hold `<root>/models/nightly.lock` for the block; a second holder gets NightlyBusy at once, naming the first
    (storage/locks.py: released when the holder exits or is killed)."""
    path = models_dir(root) / "nightly.lock"
    me = f"{owner} (pid {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S')})\n"
    with file_lock(
        path, owner=me, refused=lambda busy: NightlyBusy(f"{busy}: one nightly-retrain at a time per data root")
    ):
        yield
