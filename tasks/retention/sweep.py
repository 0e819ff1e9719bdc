"""Carry out a retention plan, crash-safely, and measure what a root holds.

Every deletion is a rename into `<root>/.trash/` (atomic on one filesystem) followed by removing the
trash: a kill -9 at any moment leaves each output either whole or gone, never half there. A pruned
training run's manifest is rewritten first (atomically) without the files it loses, marked `pruned`, so
`gur verify` passes at every step and the run is rebuilt, never reused, if it is asked for again. Sizes
count each hard-linked file once (shards linked between outputs share their blocks).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

from storage.atomic import atomic_write_json
from storage.layout import MANIFEST
from tasks.retention.plan import TRASH, Plan


def files_under(paths: Iterable[Path]) -> dict[tuple[int, int], tuple[int, int, int]]:
    """(device, inode) -> (size, links, links seen here) of every file under `paths`."""
    found: dict[tuple[int, int], list[int]] = {}
    for base in paths:
        if not base.exists():
            continue
        for path in [base] if base.is_file() else base.rglob("*"):
            if path.is_file() and not path.is_symlink():
                st = path.stat()
                entry = found.setdefault((st.st_dev, st.st_ino), [st.st_size, st.st_nlink, 0])
                entry[2] += 1
    return {key: tuple(value) for key, value in found.items()}


def size_of(paths: Iterable[Path]) -> int:
    """Bytes under `paths`, each hard-linked file once."""
    return sum(size for size, _, _ in files_under(paths).values())


def freed_by(paths: Iterable[Path]) -> int:
    """Bytes deleting `paths` frees: files whose every link is among them."""
    return sum(size for size, links, seen in files_under(paths).values() if seen >= links)


def freed_by_stage(paths: dict[str, list[Path]]) -> dict[str, int]:
    """`freed_by` all of `paths` together, split by stage: a file whose links are all among them counts once,
    under the first stage (in sorted order) that holds one of its links (a folder ingest links its per-file
    units' shards, so deleting both frees bytes that deleting either alone does not). The values add up to
    `freed_by` of every path."""
    files: dict[tuple[int, int], list] = {}
    for stage in sorted(paths):
        for key, (size, links, seen) in files_under(paths[stage]).items():
            entry = files.setdefault(key, [size, links, 0, stage])
            entry[2] += seen
    freed = dict.fromkeys(paths, 0)
    for size, links, seen, stage in files.values():
        if seen >= links:
            freed[stage] += size
    return freed


def size_by_stage(paths: dict[str, list[Path]]) -> dict[str, int]:
    """Bytes under each stage's `paths`, every file once, under the first stage (in sorted order) that holds a
    link to it: the values add up to `size_of` every path."""
    seen: set[tuple[int, int]] = set()
    held = dict.fromkeys(paths, 0)
    for stage in sorted(paths):
        for key, (size, _, _) in files_under(paths[stage]).items():
            if key not in seen:
                seen.add(key)
                held[stage] += size
    return held


def targets(root: Path, plan: Plan) -> dict[str, list[Path]]:
    """The folders each stage loses, by stage (`train` prunes count under `train`)."""
    out: dict[str, list[Path]] = {}
    for path in plan.delete:
        out.setdefault(path.split("/")[0], []).append(root / path)
    for path, subs in plan.prune.items():
        out.setdefault(path.split("/")[0], []).extend(root / path / sub for sub in subs)
    if plan.trash:
        out.setdefault(TRASH, []).extend(plan.trash)
    return out


def to_trash(root: Path, path: Path) -> None:
    if path.exists():
        trash = root / TRASH
        trash.mkdir(exist_ok=True)
        os.rename(path, trash / f"{'-'.join(path.relative_to(root).parts)}-{time.time_ns()}")


def mark_pruned(folder: Path, subs: tuple[str, ...], why: str) -> None:
    """Rewrite the manifest without the files under `subs`, marked `pruned` (before anything is deleted)."""
    path = folder / MANIFEST
    manifest = json.loads(path.read_text(encoding="utf-8"))
    files = manifest.get("files") or {}
    kept = {rel: info for rel, info in files.items() if rel.split("/")[0] not in subs}
    if kept == files and "export" not in subs:
        return  # checkpoints only: never listed, nothing to rewrite
    gone = sorted(set(manifest.get("pruned", {}).get("deleted", [])) | set(subs))
    manifest["files"] = kept
    manifest["pruned"] = {"deleted": gone, "at": time.time(), "why": why}
    atomic_write_json(path, manifest, fsync=True)  # on disk before the move: a power cut never shows the old list


def apply(root: Path, plan: Plan, progress=print) -> None:
    """Delete what the plan says (measure it first: `freed_by_stage(targets(root, plan))`). Resumable: a rerun
    after a kill finishes it."""
    root = Path(root)
    for i, path in enumerate(sorted(plan.delete), 1):
        to_trash(root, root / path)
        if i % 200 == 0:
            progress(f"gc: {i} of {len(plan.delete)} outputs moved to {TRASH}")
    for path, subs in sorted(plan.prune.items()):
        folder = root / path
        if (folder / MANIFEST).exists():
            mark_pruned(folder, subs, plan.prune_why.get(path, ""))
        for sub in subs:
            to_trash(root, folder / sub)
    if (root / TRASH).exists():
        shutil.rmtree(root / TRASH)
