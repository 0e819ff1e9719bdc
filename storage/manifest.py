"""`_manifest.json`: written last, so its presence means the stage is complete.

It lists every file of the output with its size and SHA-256 (`files`), so a reader can tell a
complete output from one that rotted or was truncated after it was written.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
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


# A file's SHA-256 by (device, inode, size, mtime): a hard link shares all four with the file it links, so a
# shard linked from a complete output (`note_linked`) is not read again when the new output lists it. Stage
# outputs are never edited in place (a rewrite is a new inode), so a key never names other bytes.
_HASHES: dict[tuple[int, int, int, int], str] = {}
HASHES_KEPT = 200_000


def _file_key(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _listed(manifest: str, mtime_ns: int, size: int) -> dict[str, dict[str, Any]]:
    """A manifest's inventory (keyed by the manifest's stat: a rewritten one is read again)."""
    try:
        return json.loads(Path(manifest).read_text(encoding="utf-8")).get("files") or {}
    except (OSError, ValueError):
        return {}


def note_linked(source_dir: Path, source: Path) -> None:
    """`source` (a file of the complete output `source_dir`) was just linked into another output: its
    SHA-256 is the one `source_dir`'s manifest lists, when the size still matches. A night links every file
    unit's shards of a folder into new outputs; without this each is hashed again, every night."""
    manifest = os.path.join(source_dir, MANIFEST)
    try:
        st_manifest, st = os.stat(manifest), os.stat(source)
    except OSError:
        return
    entry = _listed(manifest, st_manifest.st_mtime_ns, st_manifest.st_size).get(
        os.path.relpath(source, source_dir).replace(os.sep, "/")
    )
    if entry and entry.get("size") == st.st_size and entry.get("sha256"):
        _remember(_file_key(st), entry["sha256"])


def file_sha256(path: str, st: os.stat_result) -> str:
    """`sha256_file`, unless the same inode's bytes were hashed or listed before (see `_HASHES`)."""
    key = _file_key(st)
    sha = _HASHES.get(key)
    if sha is None:
        sha = sha256_file(Path(path))
        _remember(key, sha)
    return sha


def _remember(key: tuple[int, int, int, int], sha: str) -> None:
    if len(_HASHES) >= HASHES_KEPT:  # a serve process runs for months: a cache, not a record
        _HASHES.clear()
    _HASHES[key] = sha


def inventory(out_dir: Path, exclude: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """{relative path: {size, sha256}} of every file under `out_dir`, sorted; hidden temporaries,
    the manifest itself, `_tmp/` and the top-level names in `exclude` are left out. Plain `os.walk`: an
    assembled folder output holds a few files per file unit, and pathlib's walk cost more than the hashing."""
    skip = set(NOT_LISTED) | set(exclude)
    base = os.fspath(out_dir)
    found: list[tuple[list[str], str, int]] = []
    for folder, dirs, names in os.walk(base):
        rel_dir = os.path.relpath(folder, base)
        parts = [] if rel_dir == "." else rel_dir.split(os.sep)
        dirs[:] = [d for d in dirs if not d.startswith(".") and (parts or d not in skip)]
        for name in names:
            if name.startswith(".") or (not parts and name in skip):
                continue
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                found.append(([*parts, name], path, os.stat(path)))
    found.sort(key=lambda item: item[0])  # Path order: part by part
    return {"/".join(rel): {"size": st.st_size, "sha256": file_sha256(path, st)} for rel, path, st in found}


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
