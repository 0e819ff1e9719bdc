"""A root's records as versions before relative records wrote them: every path under the root absolute.

Those versions named, where the root was when they wrote: the champion registry's exports and config, the
rollback marks, the embeddings pointer's and outputs' model, an evaluation unit's model and held-out dataset,
the held-out suite's files, an ingest's corpus folder when it was a held-out split's training side, a keywords
output's corpus and a training run's start model. `absolute_records(root)` rewrites a root made by the current
code into that form, so tests can check that such a root still works (moved or not)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

# file pattern -> the (nested) keys naming a path
RECORDS: dict[str, list[tuple[str, ...]]] = {
    "models/champion.json": [("export",), ("config",)],
    "models/start.json": [("export",), ("config",)],
    "models/history/*.json": [("export",), ("config",)],
    "embed/active.json": [("model_path",), ("spec",)],
    "embed/*/_manifest.json": [("config", "model_path"), ("inputs", "model")],
    "eval-unit/*/_manifest.json": [("inputs", "model"), ("inputs", "dataset", "path")],
    "holdout/*/_suite.json": [("stackoverflow",)],
    "ingest/*/_manifest.json": [("inputs", "path")],
    "keywords/*/_manifest.json": [("corpus",)],
    "train/*/_manifest.json": [("config", "init_from")],
}


def absolute_records(root: Path) -> int:
    """Rewrite the root's relative records as absolute paths under `root`; returns how many values changed."""
    root = Path(root)

    def absolute(value: Any) -> Any:
        if isinstance(value, str) and value and not Path(value).is_absolute() and (root / value).exists():
            return str(root / value)
        return value

    changed = 0
    for pattern, keys in RECORDS.items():
        for path in sorted(root.glob(pattern)):
            record = json.loads(path.read_text(encoding="utf-8"))
            before = json.dumps(record, sort_keys=True)
            for key in keys:
                _update(record, key, absolute)
            if pattern == "holdout/*/_suite.json":
                record["beir"] = [absolute(p) for p in record.get("beir", [])]
            after = json.dumps(record, sort_keys=True)
            if after != before:
                changed += 1
                path.write_text(json.dumps(record, indent=2), encoding="utf-8")
    marks = root / "models" / "rolled_back.json"
    if marks.exists():
        found = json.loads(marks.read_text(encoding="utf-8"))
        marks.write_text(json.dumps({absolute(k): v for k, v in found.items()}), encoding="utf-8")
        changed += 1
    return changed


def _update(record: dict, key: tuple[str, ...], change: Callable[[Any], Any]) -> None:
    for part in key[:-1]:
        record = record.get(part)
        if not isinstance(record, dict):
            return
    if key[-1] in record:
        record[key[-1]] = change(record[key[-1]])
