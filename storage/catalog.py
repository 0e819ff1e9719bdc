"""`catalog.duckdb`: DuckDB views over the complete stage outputs of a data root.

One schema per build, so the tables of one build always come from the same run:

- a build-pairs run (a `shuffle` output and the `pair`, `split`, `ingest` outputs it was made
  from) is schema `<source>_<shuffle fingerprint[:8]>` with `documents`, `rejects`, `sentences`,
  `pairs`, `shards`, `shards_short`, `shards_long`;
- a mine-keywords run is schema `<source>_kw_<keywords fingerprint[:8]>` with `keywords`,
  `topics`, `topic_sweep` and the `documents`, `rejects` (and `sentences`) they were mined from.

`main` (what an unqualified name reads) holds the same views for one build and one keywords
run: those the latest flow run used, else the ones `main` showed before, else the newest.
A build without shards never becomes `main`'s build while one with shards exists.
`metrics` is every evaluation ever run on the root, `metrics_latest` the newest value per
model x dataset x task x metric x k; `train_metrics` is every training run's rows, each with the
run's `train_fingerprint`, `method` and the `input_stage` / `input_fingerprint` it trained on
(a `shuffle` or `keywords` output: `builds.fingerprint`, so `JOIN builds b ON b.fingerprint =
t.input_fingerprint` names the build schema; `file` inputs have no fingerprint). Other tables
(`promotions`) follow the newest output. Each schema (and `main`) has a `manifests` view: one row
per stage output behind its views (rows, drops, timings, config as JSON). The table `builds` lists
the schemas (with the head output's `fingerprint`); `catalog_views` the Parquet files behind each
view (and, for `train_metrics`, the columns each file's rows get: `file_columns`).

Writers take `<root>/.catalog.lock` (an exclusive `flock`) first, so two runs finishing on one
data root update the catalog one after the other. Every update plans the whole catalog from the
manifests, writes it to a temporary file and renames it into place: open read-only sessions do not
block it, a file DuckDB cannot read (written by another DuckDB version) is simply replaced, and
tables of your own belong in another database file (`ATTACH 'mine.duckdb'`). The temporary file is
a copy of the catalog the last update wrote (`.catalog-main.json` records its stat, the DuckDB
version and each view's SQL) with only the changed views made again, or, when the catalog is any
other file, written whole: the same views either way, and a night's updates stop costing more as
the root keeps more runs and builds. An open read-write session is waited for until the same deadline.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from glob import glob as expand
from glob import has_magic
from pathlib import Path

import duckdb
import xxhash

from storage.atomic import atomic_write_text
from storage.layout import CATALOG, MANIFEST
from storage.locks import LockBusy, file_lock

log = logging.getLogger(__name__)
LOCK = ".catalog.lock"
WAIT_S = 120.0  # how long a writer waits for the catalog before giving up with a clear message
BUILD_TABLES = ("documents", "rejects", "sentences", "pairs", "shards", "shards_short", "shards_long")
KEYWORD_TABLES = ("keywords", "topics", "topic_sweep")
HEADS = {"shuffle": "build", "keywords": "keywords"}  # the stage that ends a build, and the kind of build
HEAD_ROWS = {"shuffle": "rows_out", "keywords": "keywords"}  # the manifest row count that makes a build non-empty
UNION_TABLES = ("metrics",)  # every output's rows (duplicates across reports once), not the newest output's
# Every output's rows, each tagged with columns from its own manifest (`_run_columns`), not the newest output's.
RUN_TABLES = ("train_metrics",)
IDENTIFIER = re.compile(r"[A-Za-z0-9_]+")  # schema, table and column names spliced into SQL
GLOB = re.compile(r"[A-Za-z0-9_\-.*?/]+")  # a manifest's table pattern, relative to its stage folder
# Tables whose files gain columns over time (one file per row): read by column name, older files give NULL.
BY_NAME_TABLES = ("promotions",)
# Tables that follow a pointer file (`{"path": "<stage>/<fingerprint>"}`) instead of the newest output writing them:
# `embeddings` is the output `gur embed` or a night made current (tasks/embed/outputs.py), switched by one rename.
POINTED = {"embeddings": "embed/active.json"}
METRICS_KEY = ("model", "dataset", "task", "metric", "k")
MANIFEST_COLUMNS = {  # the `manifests` view: one row per stage output of a build; nested fields stay JSON
    "stage": "VARCHAR",
    "fingerprint": "VARCHAR",
    "code_version": "VARCHAR",
    "config": "JSON",
    "inputs": "JSON",
    "rows": "JSON",
    "drops": "JSON",
    "timings": "JSON",
    "coerced": "JSON",
    "false_negatives": "JSON",
    "stats": "JSON",
    "rebuilt": "JSON",
    "started_at": "DOUBLE",
    "finished_at": "DOUBLE",
}
DERIVED = {
    "metrics_latest": f"SELECT * FROM metrics QUALIFY row_number() OVER "
    f"(PARTITION BY {', '.join(METRICS_KEY)} ORDER BY created_at DESC) = 1"
}


class CatalogBusyError(RuntimeError):
    pass


@dataclass(frozen=True)
class Build:
    """The outputs behind one schema: a head output (`shuffle` or `keywords`) and its upstream."""

    kind: str  # "build" (build-pairs) or "keywords" (mine-keywords)
    schema: str
    output: str  # the head's `<stage>/<fingerprint>`
    source: str  # the ingest's input path
    rows: int  # shards (build) or keyword rows: 0 is an empty build
    finished_at: float
    tables: dict[str, list[Path]] = field(default_factory=dict)  # view name -> absolute Parquet globs
    manifests: tuple[Path, ...] = ()  # the `_manifest.json` of every output, upstream first


@dataclass
class CatalogPlan:
    """What `refresh_catalog` writes: the per-build schemas and `main`'s view name -> globs."""

    builds: list[Build]
    main: dict[str, list[Path]]
    main_builds: dict[str, str]  # kind -> output shown in `main`
    # RUN_TABLES view name -> per glob of `main[view]`, the constant columns its rows get
    file_columns: dict[str, list[dict[str, str | None]]] = field(default_factory=dict)

    @property
    def main_manifests(self) -> tuple[Path, ...]:
        shown = [b for b in self.builds if self.main_builds.get(b.kind) == b.output]
        return tuple(dict.fromkeys(path for b in shown for path in b.manifests))

    def tables(self, build: str | None = None) -> dict[str, list[Path]]:
        """View name -> globs of `main` (`build=None`) or of the schema named `build`."""
        if build is None or build == "main":
            return self.main
        for b in self.builds:
            if b.schema == build:
                return b.tables
        raise KeyError(f"no build {build!r} in the catalog (known: {', '.join(b.schema for b in self.builds)})")


@contextmanager
def catalog_lock(root: Path, wait_s: float = WAIT_S) -> Iterator[None]:
    """Hold the catalog's writer lock; raise CatalogBusyError after `wait_s` seconds of waiting."""

    def refused(_: LockBusy) -> CatalogBusyError:
        return CatalogBusyError(f"{root / CATALOG}: another run has been updating the catalog for {wait_s:.0f} s")

    with file_lock(root / LOCK, wait_s=wait_s, refused=refused):
        yield


def _unreadable_version(exc: Exception) -> bool:
    return "version number" in str(exc) or "newer version of duckdb" in str(exc).lower()


def _previous_main(path: Path, deadline: float) -> dict[str, str]:
    """kind -> output `main` showed, from the catalog being replaced ({} when there is none or DuckDB
    cannot read it: written by another DuckDB version). Readers (a `duckdb -readonly` session) do not
    block this; an open read-write session does, and is waited for until the deadline."""
    if not path.exists():
        return {}
    remembered = _remembered_main(path)
    if remembered is not None:
        return remembered
    while True:
        try:
            con = duckdb.connect(str(path), read_only=True)
            break
        except duckdb.Error as exc:
            if _unreadable_version(exc) or "lock" not in str(exc).lower():
                log.warning("%s: %s; rebuilding it", path, str(exc).splitlines()[0])
                return {}
            if time.monotonic() > deadline:
                raise CatalogBusyError(f"{path}: {str(exc).splitlines()[0]}") from None
            time.sleep(0.5)
    try:
        rows = con.execute("SELECT kind, output FROM builds WHERE in_main").fetchall()
    except duckdb.Error:  # a catalog from before `builds`
        rows = []
    finally:
        con.close()
    return dict(rows)


def main_builds(root: Path, wait_s: float = WAIT_S) -> dict[str, str]:
    """kind -> the output the catalog's `main` shows ({} without a catalog, or one of another DuckDB version);
    busy past `wait_s`: CatalogBusyError."""
    return _previous_main(root / CATALOG, time.monotonic() + wait_s)


MAIN = ".catalog-main.json"  # what `main` shows and a stamp per view, beside the catalog file it was written with
SIDECAR_VERSION = 2


def _recorded(path: Path) -> dict:
    """What the last refresh recorded beside the catalog file `path`, whichever file it was written with ({}
    when there is nothing readable)."""
    try:
        data = json.loads((path.parent / MAIN).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _sidecar(path: Path) -> dict | None:
    """What the last refresh recorded beside the catalog (`main`'s builds, a stamp per view), when the catalog
    is still the file it wrote (same inode, mtime and size); None otherwise."""
    data = _recorded(path)
    try:
        st = os.stat(path)
    except OSError:
        return None
    return data if data.get("catalog") == [st.st_ino, st.st_mtime_ns, st.st_size] else None


def _remembered_main(path: Path) -> dict[str, str] | None:
    """`main`'s builds as the last refresh recorded them (see `_sidecar`). Opening the catalog to ask costs
    more each night: DuckDB loads every view, and the record views list a file per evaluation and run the
    root ever kept."""
    main = (_sidecar(path) or {}).get("main")
    return main if isinstance(main, dict) else None


def _remembered_write(path: Path) -> dict | None:
    """The sidecar of the catalog file as the last refresh wrote it, with its `views` (view -> stamp) and
    `tables` stamps (None: not ours, or from older code)."""
    data = _sidecar(path) or {}
    same = data.get("version") == SIDECAR_VERSION and data.get("duckdb") == duckdb.__version__
    return data if same and isinstance(data.get("views"), dict) else None


def _remember_main(
    path: Path, main: dict[str, str], views: dict[str, str] | None = None, tables: str | None = None
) -> None:
    try:
        st = os.stat(path)
        data = {"catalog": [st.st_ino, st.st_mtime_ns, st.st_size], "main": main, "root": str(path.parent.resolve())}
        if views is not None:
            data.update(version=SIDECAR_VERSION, duckdb=duckdb.__version__, views=views, tables=tables)
        atomic_write_text(path.parent / MAIN, json.dumps(data, separators=(",", ":")))
    except OSError as exc:  # only a shortcut: the next refresh opens the catalog and writes it whole
        log.debug("%s not written: %s", MAIN, exc)


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


def quote_name(name: str) -> str:
    """A schema, table or column name as a quoted SQL identifier; anything but `[A-Za-z0-9_]+` raises."""
    if not IDENTIFIER.fullmatch(name):
        raise ValueError(f"not a catalog name ({IDENTIFIER.pattern}): {name[:60]!r}")
    return f'"{name}"'


def latest_tables(
    root: Path,
    current: list[Path] = (),
    manifests: dict[Path, dict] | None = None,
    globs: dict[Path, dict[str, Path]] | None = None,
) -> dict[str, Path]:
    """Map table name -> absolute Parquet glob of the newest complete stage that writes it.

    `current`: stage folders a flow run just used; their tables win over newer ones. `manifests`:
    `_manifests(root)` when the caller has read them already; `globs`: `_all_globs(manifests)`, likewise.
    """
    best: dict[str, tuple[float, Path]] = {}
    manifests = _manifests(root) if manifests is None else manifests
    globs = _all_globs(manifests) if globs is None else globs
    for folder, manifest in manifests.items():
        finished = float(manifest.get("finished_at", 0.0))
        for table, glob in globs[folder].items():
            if table not in best or finished >= best[table][0]:
                best[table] = (finished, glob)
    for folder in current:
        manifest = _manifest(folder / MANIFEST) if (folder / MANIFEST).exists() else None
        if manifest and unsafe_tables(folder, manifest):
            continue  # `_manifests` logged it
        for table, glob in _globs(folder, manifest or {}).items():
            best[table] = (float("inf"), glob)
    return {table: glob for table, (_, glob) in sorted(best.items())}


def _run_columns(folder: Path, manifest: dict) -> dict[str, str | None]:
    """What a train output's rows carry: its fingerprint, method and the input it trained on (the
    upstream `shuffle` / `keywords` output, as `train_task` records it; a `file` input has no
    stage output, so only its stage)."""
    upstream = (manifest.get("upstream") or [{}])[0]
    inputs = manifest.get("inputs") if isinstance(manifest.get("inputs"), dict) else {}
    method = (manifest.get("config") or {}).get("method") or (manifest.get("labels") or {}).get("method")
    return {
        "train_fingerprint": manifest.get("fingerprint") or folder.name,
        "method": method,
        "input_stage": upstream.get("stage") or next(iter(inputs), None),
        "input_fingerprint": upstream.get("fingerprint"),
    }


def schema_name(source: str, kind: str, fingerprint: str) -> str:
    """`wiki_1a2b3c4d` / `questions_kw_5e6f7a8b`: a plain SQL identifier from the source name or input path."""
    name = re.sub(r"[^a-z0-9]+", "_", Path(source).name.split(".")[0].lower()).strip("_")[:32] or "corpus"
    if name[0].isdigit():
        name = "c_" + name
    return f"{name}{'_kw' if kind == 'keywords' else ''}_{fingerprint[:8]}"


def find_builds(
    root: Path, manifests: dict[Path, dict] | None = None, globs: dict[Path, dict[str, Path]] | None = None
) -> list[Build]:
    """Every complete build: a head output whose upstream outputs are all complete, oldest first."""
    manifests = _manifests(root) if manifests is None else manifests
    builds = []
    for folder, manifest in manifests.items():
        stage = folder.parent.name
        if stage not in HEADS:
            continue
        chain, tables, current = [folder], {}, manifest
        while current.get("upstream"):
            upstream = root / current["upstream"][0]["path"]
            current = manifests.get(upstream)
            if current is None:
                break
            chain.append(upstream)
        if current is None:
            continue  # an upstream output was deleted or is damaged: not a build any more
        for part in reversed(chain):
            part_globs = globs[part] if globs is not None else _globs(part, manifests[part])
            tables.update({t: [g] for t, g in part_globs.items()})
        ingest = manifests[chain[-1]]
        head_source = ingest.get("inputs", {}).get("path", "")
        name = (ingest.get("config") or {}).get("source_name") or head_source  # the documents' `source`
        builds.append(
            Build(
                kind=HEADS[stage],
                schema=schema_name(name or "corpus", HEADS[stage], folder.name),
                output=f"{stage}/{folder.name}",
                source=head_source,
                rows=int(manifest.get("rows", {}).get(HEAD_ROWS[stage], 0)),
                finished_at=float(manifest.get("finished_at", 0.0)),
                tables=tables,
                manifests=tuple(part / MANIFEST for part in reversed(chain)),
            )
        )
    return sorted(builds, key=lambda b: (b.finished_at, b.output))


def _pick(builds: list[Build], current: list[str], previous: str | None) -> Build | None:
    """The build `main` shows: the current run's (when not empty), else the previous one, else the
    newest non-empty one, else the newest."""
    by_output = {b.output: b for b in builds}
    for output in current:
        if output in by_output and by_output[output].rows > 0:
            return by_output[output]
    if previous in by_output and by_output[previous].rows > 0:
        return by_output[previous]
    non_empty = [b for b in builds if b.rows > 0]
    return (non_empty or builds or [None])[-1]


def plan_catalog(
    root: Path, current: list[Path] = (), previous: dict[str, str] | None = None, without: frozenset[str] = frozenset()
) -> CatalogPlan:
    """Which files every view reads. `current`: the stage folders the latest flow run used;
    `previous`: kind -> output `main` showed before (from the catalog's `builds` table); `without`: outputs
    (`stage/fingerprint`) to leave out, as if deleted (what a gc is about to delete)."""
    manifests = _manifests(root)
    if without:
        manifests = {f: m for f, m in manifests.items() if f"{f.parent.name}/{f.name}" not in without}
    globs = _all_globs(manifests)
    builds = find_builds(root, manifests, globs)
    current_outputs = [f"{folder.parent.name}/{folder.name}" for folder in current]
    main: dict[str, list[Path]] = {}
    for table, glob in latest_tables(root, current, manifests, globs).items():
        if table not in BUILD_TABLES + KEYWORD_TABLES + UNION_TABLES + RUN_TABLES:
            main[table] = [glob]
    for table, pointer in POINTED.items():
        pointed = _pointed(root, pointer, manifests).get(table)
        if pointed is not None:
            main[table] = [pointed]
    by_table: dict[str, list[tuple[Path, Path]]] = {}  # table -> (output, glob), in the manifests' order
    for folder, tables in globs.items():
        for table, glob in tables.items():
            by_table.setdefault(table, []).append((folder, glob))
    for table in UNION_TABLES:
        union = [g for _, g in by_table.get(table, [])]
        if union:
            main[table] = union
    file_columns: dict[str, list[dict[str, str | None]]] = {}
    for table in RUN_TABLES:  # oldest run first; a run that wrote no file (no metrics rows) is left out
        runs = sorted(
            (float(manifests[folder].get("finished_at", 0.0)), str(g), g, _run_columns(folder, manifests[folder]))
            for folder, g in by_table.get(table, [])
            if _files_exist([g])
        )
        if runs:
            main[table] = [g for _, _, g, _ in runs]
            file_columns[table] = [columns for *_, columns in runs]
    shown: dict[str, str] = {}
    for kind, names in (("keywords", KEYWORD_TABLES), ("build", BUILD_TABLES)):
        chosen = _pick([b for b in builds if b.kind == kind], current_outputs, (previous or {}).get(kind))
        if chosen is not None:
            shown[kind] = chosen.output
            # A keywords run lends its documents to `main` only while there is no build-pairs run.
            main.update({t: g for t, g in chosen.tables.items() if t in names or t not in main})
    return CatalogPlan(builds=builds, main=dict(sorted(main.items())), main_builds=shown, file_columns=file_columns)


def _pointed(root: Path, pointer: str, manifests: dict[Path, dict]) -> dict[str, Path]:
    """The tables of the complete output a pointer file names ({} when there is none, or it is not complete)."""
    try:
        folder = root / json.loads((root / pointer).read_text(encoding="utf-8"))["path"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return _globs(folder, manifests[folder]) if folder in manifests else {}


def _files_exist(globs: list[Path]) -> bool:
    return any(_matches_any(str(g)) for g in globs)


def _matches_any(glob: str) -> bool:
    """Whether `glob` matches a file, stopping at the first: a plain name needs one stat, a wildcard only in
    the file name one folder listing (an assembled folder output holds a shard per file unit, and every view
    of every kept build is checked at each refresh); other globs the glob machinery."""
    if not has_magic(glob):
        return os.path.exists(glob)
    folder, pattern = os.path.split(glob)
    if has_magic(folder):
        return bool(expand(glob))
    try:
        with os.scandir(folder) as entries:
            hidden = pattern.startswith(".")  # as glob: a hidden name only for a pattern that starts with a dot
            return any(fnmatch.fnmatchcase(e.name, pattern) for e in entries if hidden or not e.name.startswith("."))
    except OSError:
        return False


def _quote(value: object) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _select(table: str, globs: list[Path]) -> str:
    paths = ", ".join(_quote(g) for g in globs)
    by_name = len(globs) > 1 or table in BY_NAME_TABLES
    source = f"read_parquet([{paths}], union_by_name = true)" if by_name else f"read_parquet({paths})"
    return f"SELECT {'DISTINCT ' if table in UNION_TABLES else ''}* FROM {source}"


def _select_runs(globs: list[Path], file_columns: list[dict[str, str | None]]) -> str:
    """Each file's rows after its own constant columns; `UNION ALL BY NAME`, as runs of different
    methods log different loss columns."""
    parts = []
    for glob, columns in zip(globs, file_columns, strict=True):
        constants = ", ".join(
            f"CAST({'NULL' if value is None else _quote(value)} AS VARCHAR) AS {quote_name(name)}"
            for name, value in columns.items()
        )
        parts.append(f"SELECT {constants}, * FROM read_parquet({_quote(glob)})")
    return " UNION ALL BY NAME ".join(parts)


def _select_manifests(paths: tuple[Path, ...]) -> str:
    files = ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths)
    columns = ", ".join(f"'{name}': '{kind}'" for name, kind in MANIFEST_COLUMNS.items())
    return f"SELECT * FROM read_json([{files}], format = 'auto', columns = {{{columns}}}, filename = true)"


def _views(plan: CatalogPlan) -> tuple[list[tuple[str, str, str]], list[tuple]]:
    """(schema, view, SQL) of every view in creation order, and the `catalog_views` rows."""
    views, files = [], []
    planned = [(b.schema, t, g) for b in plan.builds for t, g in b.tables.items()]
    for schema, table, globs in planned + [("main", t, g) for t, g in plan.main.items()]:
        if not _files_exist(globs):
            log.warning("catalog: no files for %s.%s (%s)", schema, table, globs[0])
            continue
        tagged = plan.file_columns.get(table) if schema == "main" else None
        sql = _select_runs(globs, tagged) if tagged else _select(table, globs)
        views.append((schema, table, sql))
        files.append(
            (schema, table, [str(g) for g in globs], table in UNION_TABLES, json.dumps(tagged) if tagged else None)
        )
    for schema, paths in [(b.schema, b.manifests) for b in plan.builds] + [("main", plan.main_manifests)]:
        if paths:
            views.append((schema, "manifests", _select_manifests(paths)))
    for name, sql in DERIVED.items():
        if "metrics" in plan.main:
            views.append(("main", name, sql))
    return views, files


def _builds_rows(plan: CatalogPlan) -> list[tuple]:
    """The `builds` table's rows."""
    return [
        (
            b.schema,
            b.kind,
            plan.main_builds.get(b.kind) == b.output,
            b.source,
            b.rows,
            b.output,
            b.finished_at,
            b.output.split("/", 1)[1],  # the head's fingerprint: train_metrics.input_fingerprint
        )
        for b in plan.builds
    ]


def _stamps(views: list[tuple[str, str, str]]) -> dict[str, str]:
    return {f"{schema}.{table}": _stamp(sql) for schema, table, sql in views}


def _tables_stamp(plan: CatalogPlan, files: list[tuple]) -> str:
    """What the catalog's two tables (`catalog_views` rows `files`, `builds`) and `main`'s builds hold."""
    payload = json.dumps([files, _builds_rows(plan), plan.main_builds], sort_keys=True, default=str)
    return xxhash.xxh3_128_hexdigest(payload.encode())


def _stamp(sql: str) -> str:
    """What a view was made from. Its SQL is enough: DuckDB binds a view's columns again when it is read, so a
    folder that gains a file with a new column (the `promotions` rows, one file per decision) needs no new view
    (tests/storage/test_catalog_builds.py checks the columns SQL tools list), and a DuckDB upgrade rebuilds the
    file."""
    return xxhash.xxh3_128_hexdigest(sql.encode())


def _write(
    con: duckdb.DuckDBPyConnection,
    plan: CatalogPlan,
    old: dict[str, str] | None = None,
    content: tuple[list[tuple[str, str, str]], list[tuple]] | None = None,
) -> dict[str, str]:
    """Write the plan's views and tables into `con`: an empty database, or (`old`: view -> stamp) a copy of the
    catalog the last refresh wrote, where only views whose stamp changed are made again, views and schemas the
    plan no longer has are dropped, and the tables are rewritten: the same catalog as a whole rebuild, at a
    fraction of the cost (binding a view reads the footer of every Parquet file it names). Returns the stamps."""
    con.execute("BEGIN TRANSACTION")
    views, files = content or _views(plan)
    stamps = _stamps(views)
    if old is not None:
        kept_schemas = {schema for schema, *_ in views}
        for schema in sorted({key.split(".", 1)[0] for key in old} - kept_schemas - {"main"}):
            con.execute(f"DROP SCHEMA IF EXISTS {quote_name(schema)} CASCADE")
        for key in sorted(set(old) - set(stamps)):
            schema, table = key.split(".", 1)
            if schema in kept_schemas or schema == "main":
                con.execute(f"DROP VIEW IF EXISTS {quote_name(schema)}.{quote_name(table)}")
    made = set()
    for schema, table, sql in views:
        key = f"{schema}.{table}"
        if old is not None and old.get(key) == stamps[key]:
            continue
        if schema != "main" and schema not in made:
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_name(schema)}")
            made.add(schema)
        con.execute(f"CREATE OR REPLACE VIEW {quote_name(schema)}.{quote_name(table)} AS {sql}")
    con.execute(
        'CREATE OR REPLACE TABLE catalog_views ("schema" VARCHAR, view_name VARCHAR, files VARCHAR[], dedup BOOLEAN, '
        "file_columns JSON)"  # per file of `files`, the constant columns its rows get (RUN_TABLES), else NULL
    )
    if files:
        _insert(con, "catalog_views", ["schema", "view_name", "files", "dedup", "file_columns"], files)
    con.execute(
        'CREATE OR REPLACE TABLE builds ("schema" VARCHAR, kind VARCHAR, in_main BOOLEAN, source VARCHAR, '
        '"rows" BIGINT, output VARCHAR, finished_at TIMESTAMPTZ, fingerprint VARCHAR)'
    )
    rows = _builds_rows(plan)
    if rows:
        names = ["schema", "kind", "in_main", "source", "rows", "output", "finished_at", "fingerprint"]
        _insert(con, "builds", names, rows)
    con.execute("COMMIT")
    return stamps


def _insert(con: duckdb.DuckDBPyConnection, table: str, names: list[str], rows: list[tuple]) -> None:
    """All `rows` in one statement through Arrow (`executemany` costs a statement per row)."""
    import pyarrow as pa

    data = pa.Table.from_pylist([dict(zip(names, row, strict=True)) for row in rows])
    con.register("_rows", data)
    try:
        casts = ", ".join(f"to_timestamp({quote_name(n)})" if n == "finished_at" else quote_name(n) for n in names)
        con.execute(f"INSERT INTO {quote_name(table)} SELECT {casts} FROM _rows")
    finally:
        con.unregister("_rows")


def refresh_catalog(
    root: Path, current: list[Path] = (), wait_s: float = WAIT_S, without: frozenset[str] = frozenset()
) -> CatalogPlan:
    """Rebuild the catalog under the catalog lock; returns what its views read.

    The new catalog is written to a temporary file and renamed over the old one, so an open
    `duckdb -readonly` session never blocks a run (it keeps seeing the views it opened; a new
    session sees the new ones). Views hold absolute paths (DuckDB resolves relative ones against
    the reader's working directory), so a moved data root is refreshed by the first command that reads
    its catalog (`connect_catalog`), or by `gur catalog --refresh`.
    """
    deadline = time.monotonic() + wait_s
    path = root / CATALOG
    with catalog_lock(root, wait_s):
        previous = _previous_main(path, deadline)
        plan = plan_catalog(root, current, previous, without)  # read under the lock: the newest runs are seen
        tmp = root / f".{CATALOG}.tmp"  # one writer at a time (the lock): a fixed name, never left behind twice
        last = _remembered_write(path)
        old = last["views"] if last else None
        content = _views(plan)
        tables = _tables_stamp(plan, content[1])
        stale_wal = path.with_name(path.name + ".wal")  # of a session that was killed (a live one holds the lock)
        same = last is not None and old == _stamps(content[0]) and last.get("tables") == tables
        if same and not stale_wal.exists():
            if last.get("root") != str(root.resolve()):  # a sidecar from before it named its root: name it
                _remember_main(path, plan.main_builds, old, tables)
            return plan  # the file already holds exactly these views and tables: nothing to write
        stamps = None
        if old is not None:  # the file the last refresh wrote: update a copy of it
            try:
                tmp.unlink(missing_ok=True)
                shutil.copyfile(path, tmp)
                stamps = _write_file(tmp, plan, old, content)
            except (OSError, duckdb.Error) as exc:
                log.warning("catalog: updating %s failed (%s); rebuilding it", path, str(exc).splitlines()[0])
        if stamps is None:
            tmp.unlink(missing_ok=True)
            stamps = _write_file(tmp, plan, None, content)
        stale_wal.unlink(missing_ok=True)
        os.replace(tmp, path)
        _remember_main(path, plan.main_builds, stamps, tables)
    return plan


# DuckDB's smallest block: a catalog is views and two small tables, and an update frees and rewrites some of
# its blocks. 16 KiB blocks keep the file at 0.3-0.6 MB on a 60-night root, against 1-2 MB with the default.
BLOCK_SIZE = 16384


def _write_file(
    path: Path,
    plan: CatalogPlan,
    old: dict[str, str] | None = None,
    content: tuple[list[tuple[str, str, str]], list[tuple]] | None = None,
) -> dict[str, str]:
    """Write `plan` into `path`: a copy of the last catalog with view stamps `old`, or a new file."""
    config = {} if old is not None else {"default_block_size": str(BLOCK_SIZE)}  # a copy keeps its block size
    con = duckdb.connect(str(path), config=config)
    try:
        return _write(con, plan, old, content)
    finally:
        con.close()  # checkpoints: everything is in the file, no WAL left


def written_elsewhere(root: Path) -> bool:
    """Whether the catalog was last written by a refresh of this root where it was before (moved or copied): its
    views hold absolute paths, so they read the old place, or fail there. The sidecar is read whatever file it
    was written with (a copy's catalog is another inode); a catalog without one naming a root is not ours to
    rewrite here (made by hand, or by an older version: the next flow's refresh names it)."""
    recorded = _recorded(root / CATALOG).get("root")
    return recorded is not None and recorded != str(Path(root).resolve())


def connect_catalog(root: Path, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """The catalog, refreshed first when it was written elsewhere (`written_elsewhere`): a moved root reads as
    before."""
    path = root / CATALOG
    if not path.exists():
        raise FileNotFoundError(f"no catalog at {path}: run a flow first (e.g. `gur demo`)")
    if written_elsewhere(root):
        try:
            refresh_catalog(root)
        except (OSError, duckdb.Error, CatalogBusyError) as exc:  # a read-only copy: its views as they are
            log.warning("catalog: %s was written elsewhere and not refreshed here (%s)", path, exc)
    try:
        return duckdb.connect(str(path), read_only=read_only)
    except duckdb.IOException as exc:
        if _unreadable_version(exc):
            raise RuntimeError(
                f"{path} was written by another DuckDB version: run `gur catalog --refresh` to rebuild it"
            ) from None
        raise


def list_views(con: duckdb.DuckDBPyConnection) -> list[tuple[str, int, str]]:
    """(view, rows, definition) for `gur catalog`: `main`'s views by name, then each build's as `schema.view`."""
    views = con.execute(
        "SELECT schema_name, view_name, sql FROM duckdb_views() WHERE NOT internal "
        "ORDER BY schema_name <> 'main', schema_name, view_name"
    ).fetchall()
    rows = []
    for schema, name, sql in views:
        count = con.execute(f'SELECT count(*) FROM "{schema}"."{name}"').fetchone()[0]
        rows.append((name if schema == "main" else f"{schema}.{name}", count, sql))
    return rows


def catalog_files(
    root: Path, name: str, build: str | None = None
) -> tuple[list[str], bool, list[dict[str, str | None]] | None]:
    """(Parquet globs, dedup, per-glob constant columns or None) behind the view `name` of `main` or of
    schema `build`, as the catalog records them."""
    con = connect_catalog(root)
    try:
        row = con.execute(
            'SELECT files, dedup, file_columns FROM catalog_views WHERE "schema" = ? AND view_name = ?',
            [build or "main", name],
        ).fetchone()
        if row is None:
            known = con.execute("""SELECT DISTINCT "schema" || '.' || view_name FROM catalog_views ORDER BY 1""")
            names = ", ".join(k for (k,) in known.fetchall())
            raise KeyError(f"no view {name!r} in {build or 'main'} (known: {names})")
    finally:
        con.close()
    columns = row[2]
    if isinstance(columns, str):
        columns = json.loads(columns)
    return list(row[0]), bool(row[1]), columns
