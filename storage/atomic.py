"""One way to replace a file: write a hidden temporary beside it, then rename over it.

A reader (or a crash) sees the old file or the new one, never half of either. The temporary
starts with a dot, so no `part-*.parquet` glob and no manifest inventory ever includes it.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def atomic_path(
    path: str | os.PathLike, suffix: str = "", tmp_dir: str | os.PathLike | None = None, fsync: bool = False
) -> Iterator[Path]:
    """Yield a temporary path to write (a file or a folder); on success it replaces `path`.

    `tmp_dir` puts the temporary in another folder of the same filesystem (a stage's `_tmp/`, which
    a resumed run sweeps: a SIGKILL skips the cleanup below). `fsync` flushes a file to disk before
    the rename, for pointers that must survive a power cut (champion.json).
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tmp_dir) if tmp_dir is not None else final.parent
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{final.name}.{uuid.uuid4().hex[:12]}{suffix}"
    try:
        yield tmp
        if fsync and tmp.is_file():
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
        if tmp.is_dir() and final.is_dir():  # os.replace cannot swap a folder for a non-empty one
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists():
            tmp.unlink()


def atomic_write_bytes(path: str | os.PathLike, data: bytes, fsync: bool = False) -> Path:
    with atomic_path(path, fsync=fsync) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str, fsync: bool = False) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), fsync=fsync)


def atomic_write_json(path: str | os.PathLike, value: Any, fsync: bool = False, **dumps: Any) -> Path:
    """Pretty, key-sorted JSON ending in a newline (the same value gives the same bytes)."""
    options = {"indent": 2, "sort_keys": True, "ensure_ascii": False, **dumps}
    return atomic_write_text(path, json.dumps(value, **options) + "\n", fsync=fsync)


def atomic_link(source: str | os.PathLike, path: str | os.PathLike, tmp_dir: str | os.PathLike | None = None) -> Path:
    """`path` becomes a hard link to `source` (the same bytes at no cost: stage outputs are never edited in
    place), or a copy where the filesystem cannot link; replaced atomically like any other write.

    Plain `os` calls, folders made only when missing: a night links every file unit's shards of a folder
    (hundreds of calls), where `atomic_path`'s pathlib work would cost four times the link itself."""
    final = os.fspath(path)
    folder = os.fspath(tmp_dir) if tmp_dir is not None else os.path.dirname(final)
    tmp = os.path.join(folder, f".{os.path.basename(final)}.{uuid.uuid4().hex[:12]}")
    link_or_copy(source, tmp)
    try:
        try:
            os.replace(tmp, final)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(final), exist_ok=True)
            os.replace(tmp, final)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return Path(final)


def link_or_copy(source: str | os.PathLike, path: str | os.PathLike) -> None:
    """A hard link at `path` (a copy where the filesystem has none), its folder made on the first link into
    it. Not atomic and never overwrites (FileExistsError): for temporaries and for folders this run emptied."""
    for attempt in (0, 1):
        try:
            os.link(source, path)
            return
        except FileNotFoundError:
            if attempt or not os.path.exists(source):
                raise
            os.makedirs(os.path.dirname(os.fspath(path)), exist_ok=True)
        except FileExistsError:
            raise
        except OSError:  # another filesystem, or one without hard links
            shutil.copyfile(source, path)
            return
