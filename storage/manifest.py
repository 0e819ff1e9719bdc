"""`_manifest.json`: written last, so its presence means the stage is complete."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from storage.layout import MANIFEST


def write_manifest(out_dir: Path, manifest: dict[str, Any]) -> Path:
    """Atomically write the manifest (temp file + rename)."""
    path = out_dir / MANIFEST
    tmp = out_dir / f".{MANIFEST}.{uuid.uuid4().hex}"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_manifest(out_dir: Path) -> dict[str, Any] | None:
    path = out_dir / MANIFEST
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def is_complete(out_dir: Path) -> bool:
    return (out_dir / MANIFEST).exists()
