"""What the catalog and the night's lookups read of a root's stage outputs: each complete output's manifest,
slimmed to the fields they plan with, kept in an index file per stage (`.catalog-index/`) that a refresh
updates by the outputs added or removed since, and checked for tables a planted manifest could turn against
its reader."""

from __future__ import annotations

import json
import logging
import os
import re
from glob import glob as expand
from glob import has_magic
from pathlib import Path

from storage.atomic import atomic_write_text
from storage.layout import MANIFEST

log = logging.getLogger("storage.catalog")  # one logger for the catalog's modules

IDENTIFIER = re.compile(r"[A-Za-z0-9_]+")  # schema, table and column names spliced into SQL
GLOB = re.compile(r"[A-Za-z0-9_\-.*?/]+")  # a manifest's table pattern, relative to its stage folder


def _manifest(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        log.warning("skipping unreadable manifest %s: %s", path, exc)
        return None


def unsafe_tables(folder: Path, manifest: dict) -> str:
    """Why a manifest's `tables` cannot become views ("" when they can): every name must be a plain
    identifier (it is spliced into SQL, quoted) and every glob a relative pattern that matches only
    files inside `folder` (no `..`, no absolute path, no link that leads out)."""
    tables = manifest.get("tables", {})
    if not isinstance(tables, dict):
        return f"tables is {type(tables).__name__}, not an object"
    base = str(folder)
    inside: str | None = None  # realpath of `folder`, computed on the first file that needs it
    safe = {base}  # folders known to resolve inside: a plain file in one is inside too
    for table, pattern in tables.items():
        if not IDENTIFIER.fullmatch(str(table)):
            return f"table name {str(table)[:60]!r} is not {IDENTIFIER.pattern}"
        bad = not isinstance(pattern, str) or not GLOB.fullmatch(pattern) or pattern.startswith("/")
        if bad or ".." in pattern.split("/"):
            return f"table {table}: glob {str(pattern)[:60]!r} is not a relative pattern inside the stage folder"
        # Strings, not Paths: this runs for every file of every output at each catalog refresh.
        for found in expand(os.path.join(base, pattern)):
            parent, link = os.path.dirname(found), os.path.islink(found)
            if parent in safe and not link:
                continue  # realpath(parent/name) = realpath(parent)/name when parent resolves inside
            inside = inside or os.path.realpath(base)
            real = os.path.realpath(found)
            if real != inside and not real.startswith(inside + os.sep):
                return f"table {table}: {found} leads outside {folder}"
            if not link:
                safe.add(parent)
    return ""


INDEX = ".catalog-index"  # what the last refresh read of each manifest, a file per stage (see `_manifests`)
OLD_INDEX = ".catalog-index.json"  # the one file earlier versions kept: removed at the first write
INDEX_VERSION = 3
# What the catalog plans with, and what the night's lookups of earlier outputs match on (the previous build
# of a folder, a warm start's earlier fit, shards an earlier output already made): never an inventory.
SLIM_FIELDS = (
    "tables", "finished_at", "upstream", "inputs", "fingerprint", "rows", "labels",
    "config_key", "shard_inputs", "settings_key", "corpus",
)  # fmt: skip


def complete_manifests(root: Path, stage: str) -> dict[Path, dict]:
    """Every complete output of `stage` -> its manifest's `SLIM_FIELDS`, through the index (see `_manifests`):
    what a stage looks earlier outputs up by, without parsing every manifest's inventory each night."""
    return _manifests(root, (stage,))


def _manifests(root: Path, stages: tuple[str, ...] = ()) -> dict[Path, dict]:
    """Every complete output's folder -> the manifest fields the catalog reads (`_slim`); a manifest whose
    tables are unsafe is skipped (logged).

    A root keeps hundreds of outputs and a night refreshes the catalog several times, in several processes:
    parsing every manifest (inventories of hundreds of files) and globbing every table each time made the
    refresh grow with the root. `<root>/.catalog-index/<stage>.json` keeps, per output, the slim fields and
    the safety verdict, keyed by the manifest's inode, mtime and size and by the mtime of every folder its
    tables glob in: an output rewritten, or a file added to or removed from a table's folder, is read again.
    A file per stage, because a night's refreshes each add an output or two: only those stages' files are
    written again, not the runs' and evaluations' records of every night the root keeps.
    The index is a cache: a missing, stale or unreadable one costs a full read, never a wrong view.
    `stages`: only those stages' outputs (the index keeps the others' entries)."""
    memo = _read_index(root)
    found: dict[Path, dict] = {}
    index: dict[str, dict[str, dict]] = {}  # stage -> rel -> entry, as this call finds them
    base = os.fspath(root)
    # Strings until a folder is found: this runs for every output of the root, several times a night.
    for stage, name in _output_names(root, stages):
        rel = f"{stage}/{name}"
        folder = f"{base}/{rel}"
        try:
            st = os.stat(f"{folder}/{MANIFEST}")
        except OSError:
            continue  # not complete (or gone)
        key = [st.st_ino, st.st_mtime_ns, st.st_size]
        entry = memo.get(stage, {}).get(rel)
        if not (entry and entry.get("key") == key and entry.get("dirs") == _dirs_key(folder, entry.get("slim"))):
            manifest = _manifest(Path(folder, MANIFEST))
            if manifest is None:
                continue
            slim = _slim(manifest)
            problem = unsafe_tables(Path(folder), manifest)
            entry = {"key": key, "dirs": _dirs_key(folder, slim), "slim": slim, "problem": problem}
        if entry["dirs"] is not None:
            index.setdefault(stage, {})[rel] = entry
        if entry["problem"]:
            log.warning("catalog: skipping %s/%s: %s", folder, MANIFEST, entry["problem"])
            continue
        path = _FOLDERS.get(folder)
        if path is None:
            path = _FOLDERS[folder] = Path(folder)
        found[path] = entry["slim"]
    for stage in sorted(set(stages) if stages else set(memo) | set(index)):
        if index.get(stage, {}) != memo.get(stage, {}):
            _write_index(root, stage, index.get(stage, {}))
    return found


_FOLDERS: dict[str, Path] = {}  # output folder -> its Path, made (and hashed) once per process


def _output_names(root: Path, stages: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(stage, fingerprint) of every folder two levels down (of `stages` only, when given), in path order
    (hidden names left out)."""
    names = []
    try:
        found = [e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith(".")]
    except OSError:
        return []
    for stage in found:
        if stages and stage not in stages:
            continue
        try:
            names += [(stage, e.name) for e in os.scandir(root / stage) if e.is_dir() and not e.name.startswith(".")]
        except OSError:
            continue
    return sorted(names)


def _slim(manifest: dict) -> dict:
    """The fields the catalog plans with; a manifest's inventory (most of its bytes) is left out."""
    slim = {k: manifest[k] for k in SLIM_FIELDS if k in manifest}
    config = manifest.get("config")
    if isinstance(config, dict):
        slim["config"] = {k: config[k] for k in ("source_name", "method") if k in config}
    return slim


def _dirs_key(folder: str | Path, slim: dict | None) -> list | None:
    """The mtime of `folder` and of every folder its tables glob in (None: a glob with a wildcard folder,
    which is never cached)."""
    tables = (slim or {}).get("tables", {})
    dirs = _table_dirs(tuple(tables.values()) if isinstance(tables, dict) else None)
    if dirs is None:
        return None
    key = []
    base = os.fspath(folder)
    for d in dirs:
        try:
            key.append(os.stat(f"{base}/{d}" if d else base).st_mtime_ns)
        except OSError:
            key.append(None)
    return key


_TABLE_DIRS: dict[tuple, tuple[str, ...] | None] = {}  # a handful of distinct `tables` layouts per root


def _table_dirs(patterns: tuple | None) -> tuple[str, ...] | None:
    """The folders (relative, "" first) that a manifest's table patterns glob in; None: a wildcard folder,
    or `tables` is not a mapping."""
    if patterns is None:
        return None
    if patterns not in _TABLE_DIRS:
        dirs = {""}
        for pattern in patterns:
            parent = os.path.dirname(pattern) if isinstance(pattern, str) else "*"
            if has_magic(parent):
                dirs = None
                break
            dirs.add(parent)
        _TABLE_DIRS[patterns] = None if dirs is None else tuple(sorted(dirs))
    return _TABLE_DIRS[patterns]


# The index files as this process last read or wrote them, by path, with each file's (inode, mtime, size) then:
# a night refreshes the catalog several times and looks earlier outputs up, and parsing the index each time
# costs a JSON parse that grows with the root. Another process's write changes the key, and is read again.
_INDEX_MEMO: dict[str, tuple[tuple[int, int, int], dict]] = {}


def _index_key(path: str | Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _read_index(root: Path) -> dict[str, dict[str, dict]]:
    """stage -> the index's entries of that stage (never mutated by callers: `_manifests` builds new dicts)."""
    folder = os.path.join(root, INDEX)
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".json") and not e.name.startswith("."))
    except OSError:
        return {}
    found = {}
    for name in names:
        path = os.path.join(folder, name)
        key, memo = _index_key(path), _INDEX_MEMO.get(path)
        if key is not None and memo is not None and memo[0] == key:
            found[name[: -len(".json")]] = memo[1]
            continue
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue
        entries = data.get("outputs") if isinstance(data, dict) and data.get("version") == INDEX_VERSION else None
        if not isinstance(entries, dict):
            continue
        if key is not None and _index_key(path) == key:  # not replaced while it was read
            _INDEX_MEMO[path] = (key, entries)
        found[name[: -len(".json")]] = entries
    return found


def _write_index(root: Path, stage: str, entries: dict[str, dict]) -> None:
    """One stage's index file (removed when the stage has no output left)."""
    path = os.path.join(root, INDEX, f"{stage}.json")
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.exists(os.path.join(root, OLD_INDEX)):
            os.unlink(os.path.join(root, OLD_INDEX))
        if not entries:
            _INDEX_MEMO.pop(path, None)
            if os.path.exists(path):
                os.unlink(path)
            return
        atomic_write_text(
            Path(path), json.dumps({"version": INDEX_VERSION, "outputs": entries}, separators=(",", ":"))
        )
    except OSError as exc:  # a read-only root: the index is only a cache
        log.debug("catalog index not written: %s", exc)
        return
    key = _index_key(path)
    if key is not None:
        _INDEX_MEMO[path] = (key, entries)


def _globs(folder: Path, manifest: dict) -> dict[str, Path]:
    return {table: folder / pattern for table, pattern in manifest.get("tables", {}).items()}


def _all_globs(manifests: dict[Path, dict]) -> dict[Path, dict[str, Path]]:
    """`_globs` of every output, made once per plan (a root holds hundreds of outputs)."""
    return {folder: _globs(folder, manifest) for folder, manifest in manifests.items()}
