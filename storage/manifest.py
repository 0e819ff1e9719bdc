"""`_manifest.json`: written last, so its presence means the stage is complete.

It lists every file of the output with its size and SHA-256 (`files`), so a reader can tell a
complete output from one that rotted or was truncated after it was written.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from storage.atomic import atomic_write_json
from storage.layout import INVALID, MANIFEST, TMP_DIR

NOT_LISTED = (MANIFEST, INVALID, TMP_DIR)  # top-level names no inventory includes


def write_manifest(out_dir: Path, manifest: dict[str, Any]) -> Path:
    """Atomically write the manifest (temp file + rename)."""
    return atomic_write_json(out_dir / MANIFEST, manifest)


def read_manifest(out_dir: Path) -> dict[str, Any] | None:
    path = out_dir / MANIFEST
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def is_complete(out_dir: Path) -> bool:
    return (out_dir / MANIFEST).exists()


def sha256_file(path: Path) -> str:
    with open(path, "rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def inventory(out_dir: Path, exclude: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """{relative path: {size, sha256}} of every file under `out_dir`, sorted; hidden temporaries,
    the manifest itself, `_tmp/` and the top-level names in `exclude` are left out."""
    skip = set(NOT_LISTED) | set(exclude)
    files = {}
    for path in sorted(out_dir.rglob("*")):
        rel = path.relative_to(out_dir)
        if rel.parts[0] in skip or any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        files[rel.as_posix()] = {"size": path.stat().st_size, "sha256": sha256_file(path)}
    return files


def check_files(out_dir: Path, manifest: dict[str, Any], hashes: bool = False) -> list[str]:
    """What no longer matches the manifest's inventory (empty: all good). Sizes always; content
    hashes when `hashes`. A manifest written before inventories existed has nothing to check."""
    problems = []
    for rel, want in (manifest.get("files") or {}).items():
        path = out_dir / rel
        if not path.is_file():
            problems.append(f"{rel}: missing")
        elif (size := path.stat().st_size) != want["size"]:
            problems.append(f"{rel}: {size} bytes, the manifest says {want['size']}")
        elif hashes and sha256_file(path) != want["sha256"]:
            problems.append(f"{rel}: content changed (SHA-256 differs from the manifest)")
    return problems
