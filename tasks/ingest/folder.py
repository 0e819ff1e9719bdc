"""A corpus folder, ingested one file at a time: each file is its own cached unit, the folder a merge of them.

    files = plan_folder(folder, config)             # every file, its format and content digest
    for f in files: ingest_file(f, config, source, <root>/ingest-file/<unit fingerprint>/)
    assemble_folder(units, out_dir)                 # the folder's `documents` and `rejects`

A unit's fingerprint is its path in the folder, its content digest, its format and the reader
config, never the folder's location or the other files: a night with one new file of N reads
only that file, and a file that did not change is never read again (its digest is).

The folder's output is the units' shards in sorted path order, linked (no copy). A document
whose title and text an earlier file (in path order) already holds is dropped there and written
as a `duplicate_document` reject naming both: exact corpus-wide dedup, whichever night a copy
arrived, and the same bytes as a cold build of the same files in any arrival order. Locations
are `path/in/folder:line`.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import shutil
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from storage.fingerprint import canonical_json, fingerprint, fingerprints
from storage.layout import stage_dir
from storage.manifest import is_complete
from storage.shards import finished_shards, link_shard, read_shard, sum_shard_stats, write_shard
from storage.stage_output import StageOutput
from tasks.ingest.documents import REJECTS_SCHEMA, IngestConfig, write_documents
from tasks.ingest.html_text import HTML_6, HTML_7, reader_version
from tasks.ingest.raw_bytes import _decompress
from tasks.ingest.readers import CorpusError, CorpusFile, corpus_files, file_format, read_member
from tasks.ingest.seen_keys import SeenKeys
from tasks.runtime.map_shards import workers_paid_for

FILE_CODE_VERSION = "ingest_file_v1"
FOLDER_CODE_VERSION = "ingest_folder_v2"  # v2: units.parquet (an older output lacks it: not a cold build's bytes)
UNIT_STAGE = "ingest-file"
PAGE_COUNTS = ("pages", "sections")


@dataclass(frozen=True)
class FileUnit:
    """One file of a corpus folder as a unit of work: what its output depends on, and where it is."""

    rel: str
    path: str
    digest: str  # xxh3-128 of the bytes ("hidden" for a dot-named file, which is never read)
    format: str
    hidden: bool
    read_as: str | None = None  # an HTML page that a later reader reads otherwise: its version (content_key)

    def key(self) -> dict[str, Any]:
        digest = content_key(self.digest, self.format, self.read_as)
        return {"path": self.rel, "digest": digest, "format": self.format}


# Formats whose reader has changed what it reads from the same bytes since FILE_CODE_VERSION: the version is
# part of such a file's key (its unit and the held-out mirror read it again), so a night equals a cold build,
# while files of every other format keep their cached units. html-2: section numbers out of headings; html-3:
# a section whose id spells its heading ("manifest-related-options") is no longer dropped as boilerplate; html-4:
# a list of sentences with links (`<li><p>`) is no longer dropped as navigation; html-5: docutils' footnotes,
# citations and topics (`<aside>`) are no longer dropped as sidebars. A web archive is read again whole when any
# of its pages may read otherwise (html-7: the archive's pages read by html-6's and html-7's fixes).
READER_VERSIONS = {"html": "html-5", "warc": "html-7"}
# Since html-5 an HTML file's key names a later version only where that version reads the page otherwise
# (html_text.reader_version), so every other page keeps its cached unit, and a corpus that read correctly keeps
# its bytes and its champion. html-6: elements written self-closing (`<a id="x"/>`, XHTML's syntax) are empty, not
# left open to swallow the headings after them, and a heading broken by `<br>` stays one heading. html-7: a list
# whose words are mostly outside links is prose wherever it stands, and a heading's links are its words.
LATER_VERSIONS = (HTML_6, HTML_7)
HTML_READER = HTML_7  # the reader that tells these versions apart (a mirror's index says which checked a page)


def told_versions(entries) -> dict[str, str | None]:
    """The reader version of each HTML page among `entries` (file entries with their `digest`, the content key),
    by its bytes' digest: what `HTML_READER` told of them before, so that an unchanged page is not read twice again
    to tell it (html_text.reads_anew_in_7)."""
    told = {}
    for entry in entries:
        digest, _, version = entry["digest"].partition("+")
        told[digest] = version if version in LATER_VERSIONS else None
    return told


def content_key(digest: str, fmt: str, read_as: str | None = None) -> str:
    """A file's content digest, with its reader's version where that reader changed (`READER_VERSIONS`; for an
    HTML page that a later version reads otherwise, that version: `read_as`)."""
    if fmt == "html" and read_as:
        return f"{digest}+{read_as}"
    return f"{digest}+{READER_VERSIONS[fmt]}" if fmt in READER_VERSIONS else digest


def page_reader_version(path: Path, fmt: str) -> str | None:
    """The reader version an HTML file's key names (html_text.reader_version), None for any other file."""
    return digest_and_version(path, fmt)[1]


def digest_and_version(path: Path, fmt: str, checked: dict[str, str | None] | None = None) -> tuple[str, str | None]:
    """(`file_digest`, `page_reader_version`) from one read of the file: an HTML page is read whole for both, any
    other file streamed for its digest alone. `checked`: the versions already told for some digests (telling one
    reads the page twice where html-7 changes its bytes: html_text.reads_anew_in_7)."""
    if fmt != "html":
        return file_digest(path), None
    data = Path(path).read_bytes()
    digest = xxhash.xxh3_128(data).hexdigest()
    if checked is not None and digest in checked:
        return digest, checked[digest]
    try:
        version = reader_version(_decompress(data))
    except (OSError, EOFError, ValueError):  # unreadable: its reader says so, as a reject
        version = None
    return digest, version


def file_digest(path: Path) -> str:
    digest = xxhash.xxh3_128()
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def plan_folder(folder: Path, config: IngestConfig, told: dict[str, str | None] | None = None) -> list[FileUnit]:
    """Every file of `folder` with its digest and format, in sorted path order; `told`: the HTML pages' versions
    an earlier build told (`told_versions`)."""
    return [_unit(file, config, told) for file in corpus_files(folder)]


def _unit(file: CorpusFile, config: IngestConfig, told: dict[str, str | None] | None = None) -> FileUnit:
    if file.hidden:
        return FileUnit(file.rel, str(file.path), "hidden", "none", True)
    fmt = member_format(file, config.reader.format)
    digest, version = digest_and_version(file.path, fmt, told)
    return FileUnit(file.rel, str(file.path), digest, fmt, False, version)


def member_format(file: CorpusFile, forced: str = "auto") -> str:
    """The format a corpus file is read in: `none` for a hidden one, `unreadable` when it cannot be told (the
    reader turns it into a reject naming the file)."""
    if file.hidden:
        return "none"
    try:
        return file_format(file.path, forced)
    except (OSError, EOFError, ValueError, CorpusError):  # ValueError: Arrow's zstd errors
        return "unreadable"


def unit_fingerprint(unit: FileUnit, config: IngestConfig, source: str) -> str:
    """The reader config, the source name (part of every doc_id) and the file's path, format and digest."""
    return fingerprint(UNIT_STAGE, FILE_CODE_VERSION, config, [canonical_json({"source": source, **unit.key()})])


def folder_fingerprint(units: list[FileUnit], config: IngestConfig, source: str) -> str:
    """The units' keys in path order: where the folder is, and when each file arrived, do not matter."""
    files = canonical_json({"source": source, "files": [u.key() for u in units]})
    return fingerprint("ingest", FOLDER_CODE_VERSION, config, [files])


def ingest_file(unit: FileUnit, config: IngestConfig, source: str, out_dir: Path) -> dict[str, int]:
    """One file's `documents` and `rejects` shards (duplicates within the file are rejects here)."""
    file = CorpusFile(Path(unit.path), unit.rel, unit.hidden)
    forced = config if unit.format == "unreadable" else _forced(config, unit.format)
    return write_documents(read_member(file, forced.reader, tallies=True), source, forced, out_dir)


def _forced(config: IngestConfig, fmt: str) -> IngestConfig:
    """`config` reading one file as the format its plan found (the file is not sniffed twice)."""
    reader_format = "textdir" if fmt == "text" else fmt
    return replace(config, reader=replace(config.reader, format=reader_format))


# Reusing a unit is the normal case (every unchanged file, every night): not worth a log line each.
_UNIT_LOG = logging.getLogger("tasks.ingest.units")
_UNIT_LOG.setLevel(logging.WARNING)


def build_unit(unit: FileUnit, config: IngestConfig, source: str, root: str) -> tuple[str, bool]:
    """The unit's output folder under `<root>/ingest-file/`, made unless complete; (folder, made now)."""
    out = StageOutput.open(root, UNIT_STAGE, unit_fingerprint(unit, config, source), log=_UNIT_LOG)
    if out.complete:
        return str(out.dir), False
    ingest_file(unit, config, source, out.dir)
    stats = sum_shard_stats(out.dir)
    out.finish(
        code_version=FILE_CODE_VERSION,
        config=config,
        inputs={"source": source, **unit.key()},
        upstream=[],
        tables={},  # the folder's output is what the catalog shows
        rows={"documents": stats.get("documents", 0), "rejects": stats.get("rejects", 0)},
        drops={k.removeprefix("reject:"): v for k, v in stats.items() if k.startswith("reject:")},
    )
    return str(out.dir), True


def unit_dirs(units: list[FileUnit], config: IngestConfig, source: str, root: Path) -> list[Path]:
    """Where each unit's output is (or will be), in `units` order: `unit_fingerprint` of each, the config
    made canonical once."""
    keys = [[canonical_json({"source": source, **u.key()})] for u in units]
    return [stage_dir(root, UNIT_STAGE, f) for f in fingerprints(UNIT_STAGE, FILE_CODE_VERSION, config, keys)]


def missing_units(units: list[FileUnit], config: IngestConfig, source: str, root: Path) -> list[FileUnit]:
    """The units no earlier run completed: the files a night has to read."""
    return [u for u, d in zip(units, unit_dirs(units, config, source, root), strict=True) if not is_complete(d)]


def build_units(
    pending: list[FileUnit],
    config: IngestConfig,
    source: str,
    root: Path,
    workers: int = 0,
    on_unit: Callable[[int], None] | None = None,
) -> None:
    """Make every unit of `pending`, `workers` at a time in spawned processes (0: one per core), or here when
    the files are too few or too small to pay for a pool's start-up (`workers_paid_for`)."""
    sizes = [Path(u.path).stat().st_size for u in pending]
    workers = max(1, min(workers or os.cpu_count() or 1, len(pending), workers_paid_for(sizes, len(pending))))
    if workers == 1:
        for unit in pending:
            build_unit(unit, config, source, str(root))
            if on_unit:
                on_unit(1)
        return
    ctx = multiprocessing.get_context("spawn")  # see tasks/runtime/map_shards.py: never fork under Prefect
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        for future in as_completed([pool.submit(build_unit, u, config, source, str(root)) for u in pending]):
            future.result()
            if on_unit:
                on_unit(1)


# Per file unit, in path order, what the assembly made of it: the next night's assembly of the same folder
# starts after the files that did not change instead of reading every unit's ids again (`reused_prefix`).
ASSEMBLY = "units.parquet"
ASSEMBLY_SCHEMA = pa.schema(
    [
        ("unit", pa.string()),  # the unit's folder name (its fingerprint)
        ("doc_shards", pa.int32()),  # documents shards it gave, in order
        ("reject_shards", pa.int32()),  # rejects shards it gave
        ("counts", pa.string()),  # its own counts as JSON (documents, rejects, reject:<reason>)
        ("dropped", pa.int64()),  # its documents an earlier file held
        ("keys", pa.list_(pa.uint64())),  # the doc keys it kept, in order
        ("duplicate_ids", pa.list_(pa.string())),  # the ids of its documents an earlier file held
        ("duplicate_locations", pa.list_(pa.string())),  # and where they are (its `duplicate_document` rejects)
    ]
)


def reused_prefix(units: list[tuple[FileUnit, Path]], previous: Path | None) -> list[dict[str, Any]]:
    """The rows of `previous`'s assembly (an earlier output of the same folder) for the longest run of leading
    units it assembled the same way (the same unit folders at the same places: what each kept and dropped
    depends only on the files before it), each row's `keys` a uint64 array. [] when there is nothing to start
    from."""
    path = previous / ASSEMBLY if previous else None
    if path is None or not path.is_file() or not is_complete(previous):
        return []
    try:
        table = read_shard(path)
    except (OSError, pa.ArrowException):
        return []
    count = 0
    for (_, unit_dir), name in zip(units, table.column("unit").to_pylist(), strict=False):
        if name != unit_dir.name:
            break
        count += 1
    if count == 0:
        return []
    head = table.slice(0, count)
    rows = head.drop_columns(["keys"]).to_pylist()
    # Keys as arrays, not Python ints: a corpus of millions of documents has millions of them.
    keys = head.column("keys")
    values = keys.combine_chunks().flatten().to_numpy(zero_copy_only=False)
    ends = np.cumsum(pc.list_value_length(keys).to_numpy(zero_copy_only=False))
    for row, start, end in zip(rows, np.concatenate([[0], ends[:-1]]), ends, strict=True):
        row["keys"] = values[start:end]
    return rows


@dataclass
class Assembly:
    """An assembly in progress: where the next document and rejects shards go, and every document key so far."""

    out_dir: Path
    seen: SeenKeys = field(default_factory=SeenKeys)
    index: int = 0
    rejects_index: int = 0

    def link_reused(self, previous: Path, row: dict[str, Any]) -> None:
        """A leading file assembled the same way before: its shards linked from `previous`."""
        for _ in range(row["doc_shards"]):
            link_shard(previous, self.index, self.out_dir, self.index, fresh=True)
            self.index += 1
        for _ in range(row["reject_shards"]):
            link_shard(previous, self.rejects_index, self.out_dir, self.rejects_index, "rejects", fresh=True)
            self.rejects_index += 1

    def merge(self, unit_dir: Path) -> tuple[dict[str, Any], np.ndarray, list, list]:
        """One unit's shards: linked, or rewritten without the documents an earlier file holds. (its row's shard
        counts, the keys it kept, the dropped documents' ids and locations)."""
        kept_parts, duplicate_ids, duplicate_locations = [], [], []
        doc_shards = finished_shards(unit_dir)
        for shard in doc_shards:
            keys = _keys(read_shard(shard, ["doc_id"]).column("doc_id").to_pylist())
            new = self.seen.add_many(keys)  # ids within one unit are already unique
            kept_parts.append(keys[new])
            keep = new.tolist()
            if all(keep):
                link_shard(unit_dir, int(shard.stem.split("-")[1]), self.out_dir, self.index, fresh=True)
            else:
                table = read_shard(shard)
                duplicates = table.filter(pc.invert(pa.array(keep)))
                duplicate_ids += duplicates.column("doc_id").to_pylist()
                duplicate_locations += duplicates.column("location").to_pylist()
                write_shard(self.out_dir, self.index, table.filter(pa.array(keep)))
            self.index += 1
        reject_shards = finished_shards(unit_dir, "rejects")
        for shard in reject_shards:
            stem = int(shard.stem.split("-")[1])
            link_shard(unit_dir, stem, self.out_dir, self.rejects_index, "rejects", fresh=True)
            self.rejects_index += 1
        kept = np.concatenate(kept_parts) if kept_parts else np.zeros(0, dtype=np.uint64)
        return (
            {"doc_shards": len(doc_shards), "reject_shards": len(reject_shards)},
            kept,
            duplicate_ids,
            duplicate_locations,
        )


def assemble_folder(
    units: list[tuple[FileUnit, Path]], out_dir: Path, source: str, previous: Path | None = None
) -> dict[str, Any]:
    """Link every unit's shards into `out_dir` in path order, dropping documents an earlier file holds.

    Returns the folder's totals and one entry per file (records, documents, rejects, duplicates across
    files). Cheap (a read of each doc_id column, links, a rewrite only of shards that hold a duplicate), so
    an interrupted assembly is started again from an empty folder rather than resumed. `previous`: an earlier
    assembly of the same folder; the leading files it assembled the same way are linked from it, their ids
    read from its `units.parquet` (the same bytes, without a read per file)."""
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    done = Assembly(out_dir)
    duplicate_rows: dict[str, list] = {name: [] for name in REJECTS_SCHEMA.names}
    files, drops, assembly = [], {}, []
    prefix = reused_prefix(units, previous)
    if prefix:
        done.seen.add_many(np.concatenate([row["keys"] for row in prefix]))
    for position, (unit, unit_dir) in enumerate(units):
        if position < len(prefix):
            row = prefix[position]
            counts, dropped, kept = json.loads(row["counts"]), row["dropped"], row["keys"]
            duplicate_ids, duplicate_locations = row["duplicate_ids"], row["duplicate_locations"]
            done.link_reused(previous, row)
        else:
            counts = sum_shard_stats(unit_dir)  # documents, rejects, reject:<reason>
            row, kept, duplicate_ids, duplicate_locations = done.merge(unit_dir)
            dropped = len(duplicate_ids)
        _duplicate_rejects(duplicate_ids, duplicate_locations, source, duplicate_rows)
        assembly.append(
            {
                **row,
                "unit": unit_dir.name,
                "counts": canonical_json(counts),
                "dropped": dropped,
                "keys": kept,
                "duplicate_ids": duplicate_ids,
                "duplicate_locations": duplicate_locations,
            }
        )
        _count_drops(counts, dropped, drops)
        files.append(_file_entry(unit, unit_dir.name, counts, dropped))
    if duplicate_rows["reason"] or done.rejects_index == 0:
        table = pa.Table.from_pydict(duplicate_rows, schema=REJECTS_SCHEMA)
        write_shard(out_dir, done.rejects_index, table, "rejects")
    if done.index == 0:  # an empty folder still has a (empty) documents table
        from tasks.ingest.documents import DOCUMENTS_SCHEMA

        write_shard(out_dir, 0, DOCUMENTS_SCHEMA.empty_table())
    _write_assembly(out_dir / ASSEMBLY, assembly)
    totals = {k: sum(f[k] for f in files) for k in ("records", "documents", "rejects")}
    return {"totals": totals, "drops": dict(sorted(drops.items())), "files": files}


def _count_drops(counts: dict[str, int], dropped: int, drops: dict[str, int]) -> None:
    """Rejects by reason, and what a page reader dropped without a reject (a WARC's non-page records)."""
    reasons = {k.split(":", 1)[1]: v for k, v in counts.items() if k.startswith(("reject:", "drop:"))}
    if dropped:
        reasons["duplicate_document"] = reasons.get("duplicate_document", 0) + dropped
    for reason, n in reasons.items():
        drops[reason] = drops.get(reason, 0) + n


def _file_entry(unit: FileUnit, unit_name: str, counts: dict[str, int], dropped: int) -> dict[str, Any]:
    documents, rejects = counts.get("documents", 0) - dropped, counts.get("rejects", 0) + dropped
    return {
        **unit.key(),
        "unit": unit_name,
        "records": documents + rejects,
        "documents": documents,
        "rejects": rejects,
        "duplicates_across_files": dropped,
        **{k: counts[k] for k in PAGE_COUNTS if k in counts},  # page formats: pages and sections read
    }


def _write_assembly(path: Path, rows: list[dict[str, Any]]) -> None:
    """`units.parquet`, the same bytes for the same rows (no timestamps, fixed options); each row's `keys` an
    array, written as one list column without a Python int per key."""
    import pyarrow.parquet as pq

    from storage.atomic import atomic_path

    lengths = [len(row["keys"]) for row in rows]
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int32))
    values = np.concatenate([row["keys"] for row in rows]) if rows else np.zeros(0, dtype=np.uint64)
    keys = pa.ListArray.from_arrays(offsets, pa.array(values, type=pa.uint64()))
    columns = {name: [row[name] for row in rows] for name in ASSEMBLY_SCHEMA.names if name != "keys"}
    table = pa.Table.from_pydict({**columns, "keys": keys}, schema=ASSEMBLY_SCHEMA)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def _keys(doc_ids: list[str]) -> np.ndarray:
    """The 64-bit key of each doc_id (its hash suffix), as the dedup across files compares them."""
    return np.fromiter((int(doc_id.rsplit("-", 1)[1], 16) for doc_id in doc_ids), dtype=np.uint64, count=len(doc_ids))


def _duplicate_rejects(doc_ids: list[str], locations: list[str], source: str, rows: dict[str, list]) -> None:
    for doc_id, location in zip(doc_ids, locations, strict=True):
        values = (
            "ingest",
            source,
            location,
            "duplicate_document",
            f"same title and text as {doc_id} in an earlier file",
        )
        for name, value in zip(REJECTS_SCHEMA.names, values, strict=True):
            rows[name].append(value)


def corpus_delta(previous: list[dict[str, Any]] | None, current: list[dict[str, Any]]) -> dict[str, int]:
    """What changed since the previous build of the same folder, from the two builds' file lists:
    files new, changed (same path, other bytes), removed and unchanged, and the documents and rejects
    that came in with new or changed files or left with removed or changed ones."""
    before = {f["path"]: f for f in previous or []}
    now = {f["path"]: f for f in current}
    new = [p for p in now if p not in before]
    changed = [p for p in now if p in before and before[p]["digest"] != now[p]["digest"]]
    removed = [p for p in before if p not in now]
    came, left = new + changed, removed + changed
    return {
        "files_new": len(new),
        "files_changed": len(changed),
        "files_removed": len(removed),
        "files_unchanged": len(now) - len(new) - len(changed),
        "documents_new": sum(now[p]["documents"] for p in came),
        "rejects_new": sum(now[p]["rejects"] for p in came),
        "documents_removed": sum(before[p]["documents"] for p in left),
    }
