"""JSON Lines files the night's split writes and reads: written atomically, with the temporary outside the
folder the ingest reads, so a night killed mid-write never leaves half a file, nor a stray temporary, in the
training corpus."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from storage.atomic import atomic_path


def write_jsonl(path: Path, rows: Iterable[dict], tmp_dir: Path) -> None:
    """Replace `path` atomically with one JSON object a line."""
    with atomic_path(path, tmp_dir=tmp_dir) as tmp:
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def read_jsonl(path: Path) -> list[dict]:
    """The rows of `path`; none where it is not there."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
