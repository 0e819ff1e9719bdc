"""A night's plan kept on disk, so a night stopped and run again trains what it planned.

    key = night_key(method, inputs, start, settings, minutes)    # what decides tonight's training
    kept = kept_plan(root, key)                                   # the stopped night's plan, or None
    keep_plan(root, key, plan, ratio)                             # before training starts

The plan's step count depends on the time the data stages took. Run again after a stop (a kill, a reboot, a
session's end), the same night finds its data stages cached and more time left, and would plan more steps; a new
step count is a new training run (its fingerprint), so the stopped run's checkpoints would never be read and hours
of training would start over. The night keeps its plan (`<root>/models/plan.json`: one, the newest night's) under
a key of what decides its training (its inputs' fingerprints, the model it starts from, the training settings,
the budget); a night with the same key takes the kept plan's steps, replay and ratio, and its training resumes
from its newest checkpoint (a finished one is reused whole, so does a night stopped in its gate).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from storage.atomic import atomic_write_json
from storage.fingerprint import fingerprint

PLAN_FILE = "plan.json"


def night_key(method: str, inputs: dict[str, dict[str, str]], start: str, settings: str, minutes: float) -> str:
    """What decides a night's training: the same key, the same run. `start` as the root records it (relative
    where it lies under the root: a champion's export), so a root moved whole keeps its key."""
    return fingerprint(
        "nightly-plan",
        "v1",
        {
            "method": method,
            "inputs": {name: ref["fingerprint"] for name, ref in sorted(inputs.items())},
            "start": start,
            "settings": settings,
            "minutes": minutes,
        },
    )


def plan_path(root: Path) -> Path:
    return Path(root) / "models" / PLAN_FILE


def kept_plan(root: Path, key: str) -> dict[str, Any] | None:
    """The kept plan when it is this night's (its key), else None. An unreadable file is no plan: the night
    plans afresh and writes it again."""
    path = plan_path(root)
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return kept if isinstance(kept, dict) and kept.get("key") == key else None


def keep_plan(root: Path, key: str, plan: Any, ratio: float, planned_at: float) -> dict[str, Any]:
    """Write tonight's plan (tasks/nightly/budget.py Plan) and the replay ratio its candidate trains with."""
    kept = {
        "key": key,
        "planned_at": planned_at,
        "steps": plan.steps,
        "full_steps": plan.full_steps,
        "replay": plan.replay,
        "ratio": ratio,
    }
    path = plan_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, kept, fsync=True, sort_keys=True)
    return kept


def steps_done(root: Path, since: float, steps: int, init_from: str) -> int:
    """The newest checkpoint's step of the training run a kept plan started: a run folder written since the plan
    (`since`), of its length and start model. 0 where none is found (the estimate then counts every step; the
    trainer itself finds what it resumes from)."""
    best = 0
    for config in Path(root).glob("train/*/config.json"):
        try:
            if config.stat().st_mtime < since - 1:
                continue
            cfg = json.loads(config.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if cfg.get("max_steps") not in (steps, 0) or cfg.get("init_from") != init_from:  # 0: the recipe's epochs
            continue
        if (config.parent / "_manifest.json").exists():
            return steps  # finished: the night reuses it whole
        for ckpt in config.parent.glob("checkpoints/step-*.pt"):
            try:
                best = max(best, int(ckpt.stem.split("-")[1]))
            except (IndexError, ValueError):
                continue
    return best
