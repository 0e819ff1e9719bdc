"""The catalog's plan: which builds (a build-pairs run, a mine-keywords run) a root holds, the Parquet globs
behind each of their views, and what `main` shows, from the manifest index alone (nothing is written)."""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
from dataclasses import dataclass, field
from glob import glob as expand
from glob import has_magic
from pathlib import Path

from storage.layout import MANIFEST, recorded_path
from storage.manifest_index import _all_globs, _globs, _manifest, _manifests, unsafe_tables

log = logging.getLogger("storage.catalog")  # one logger for the catalog's modules

BUILD_TABLES = ("documents", "rejects", "sentences", "pairs", "shards", "shards_short", "shards_long")
KEYWORD_TABLES = ("keywords", "topics", "topic_sweep")
HEADS = {"shuffle": "build", "keywords": "keywords"}  # the stage that ends a build, and the kind of build
HEAD_ROWS = {"shuffle": "rows_out", "keywords": "keywords"}  # the manifest row count that makes a build non-empty
UNION_TABLES = ("metrics",)  # every output's rows (duplicates across reports once), not the newest output's
# Every output's rows, each tagged with columns from its own manifest (`_run_columns`), not the newest output's.
RUN_TABLES = ("train_metrics",)
# Tables whose files gain columns over time (one file per row): read by column name, older files give NULL.
BY_NAME_TABLES = ("promotions",)
# Tables that follow a pointer file (`{"path": "<stage>/<fingerprint>"}`) instead of the newest output writing them:
# `embeddings` is the output `gur embed` or a night made current (tasks/embed/outputs.py), switched by one rename.
POINTED = {"embeddings": "embed/active.json"}


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
                source=recorded_path(root, head_source),  # a held-out split's: recorded relative to the root
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
