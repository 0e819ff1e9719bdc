"""Ingest: stream any supported corpus into `documents` shards with stable ids.

`doc_id` = source name + a hash of title and text, so the same content gets the same id on
every run and every machine. Record-level problems (and duplicates) go to the `rejects`
table with their location; they are counted, never dropped silently.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import xxhash

from storage.shards import shard_done, sweep_temporaries, write_shard, write_shard_stats
from tasks.ingest.readers import ReaderConfig, Record, Reject, Tally, read_corpus
from tasks.ingest.seen_keys import SeenKeys

INGEST_CODE_VERSION = "ingest_v2"  # v2: compressed input by magic bytes, hidden-file rejects, coerced fields

DOCUMENTS_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("source", pa.string()),
        ("title", pa.string()),
        ("text", pa.string()),
        ("source_id", pa.string()),
        ("location", pa.string()),
    ]
)
REJECTS_SCHEMA = pa.schema(
    [
        ("stage", pa.string()),
        ("source", pa.string()),
        ("location", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)


@dataclass(frozen=True)
class IngestConfig:
    reader: ReaderConfig = field(default_factory=ReaderConfig)
    source_name: str = field(default="", metadata={"help": "name used in doc_ids (default: the input's file name)"})
    # Fixed for a run: part of the fingerprint, so resume is exact.
    docs_per_shard: int = field(default=2000, metadata={"help": "documents per Parquet shard"})
    # A shard also ends once its texts hold this many characters: memory here and in each split
    # worker stays bounded however large the documents (`docs_per_shard` documents of megabytes each would not).
    shard_chars: int = 64_000_000


def default_source_name(path: Path) -> str:
    name = path.name
    for suffix in (".bz2", ".gz", ".xml", ".jsonl", ".json", ".parquet", ".csv", ".tsv", ".txt"):
        name = name.removesuffix(suffix)
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "corpus"


def make_doc_id(source: str, title: str | None, text: str) -> str:
    digest = hashlib.blake2b(f"{title or ''}\x00{text}".encode(), digest_size=8).hexdigest()
    return f"{source}-{digest}"


class _ShardBuffer:
    def __init__(self) -> None:
        self.chars = 0
        self.docs: dict[str, list] = {name: [] for name in DOCUMENTS_SCHEMA.names}
        self.rejects: dict[str, list] = {name: [] for name in REJECTS_SCHEMA.names}
        self.reasons: dict[str, int] = {}
        self.coerced: dict[str, int] = {}
        self.tallies: dict[str, int] = {}  # the page readers' counts: pages, sections, drop:<reason>

    def __len__(self) -> int:
        return len(self.docs["doc_id"])

    def add_doc(self, **row: str | None) -> None:
        self.chars += len(row["text"])
        for name in DOCUMENTS_SCHEMA.names:
            self.docs[name].append(row[name])

    def add_reject(self, source: str, reject: Reject) -> None:
        for name, value in zip(
            REJECTS_SCHEMA.names, ("ingest", source, reject.location, reject.reason, reject.detail), strict=True
        ):
            self.rejects[name].append(value)
        self.reasons[reject.reason] = self.reasons.get(reject.reason, 0) + 1

    def add_coerced(self, fields: tuple[str, ...]) -> None:
        for name in fields:
            self.coerced[name] = self.coerced.get(name, 0) + 1


def ingest_corpus(
    path: Path, config: IngestConfig, out_dir: Path, on_record: Callable[[int], None] | None = None
) -> dict[str, int]:
    """Write `documents` and `rejects` shards of the file (or folder, read as one stream) at `path` into
    `out_dir`; returns summed counts (see `write_documents`)."""
    path = Path(path)
    source = config.source_name or default_source_name(path)
    return write_documents(read_corpus(path, config.reader, tallies=True), source, config, out_dir, on_record)


def write_documents(
    items: Iterable[Record | Reject],
    source: str,
    config: IngestConfig,
    out_dir: Path,
    on_record: Callable[[int], None] | None = None,
) -> dict[str, int]:
    """Write `documents` and `rejects` shards into `out_dir`; returns summed counts. A `Tally` (a page
    reader's count) goes into the shard's stats under its own key.

    Shard `i` holds the next `docs_per_shard` documents (fewer once they reach `shard_chars`);
    the rejects met while filling it go to rejects shard `i`. Finished shards (marker present)
    are not rewritten, so a rerun after a crash produces the same bytes. Duplicate tracking
    costs about 8 bytes per document (`SeenKeys`).
    """
    sweep_temporaries(out_dir)
    seen_docs, seen_ids = SeenKeys(), SeenKeys()
    totals: dict[str, int] = {"documents": 0, "rejects": 0}
    buffer = _ShardBuffer()
    index = 0

    def flush() -> None:
        nonlocal buffer, index
        if not shard_done(out_dir, index):
            docs = pa.Table.from_pydict(buffer.docs, schema=DOCUMENTS_SCHEMA)
            rejects = pa.Table.from_pydict(buffer.rejects, schema=REJECTS_SCHEMA)
            stats = {"documents": len(buffer), "rejects": len(buffer.rejects["reason"])}
            stats.update({f"reject:{k}": v for k, v in buffer.reasons.items()})
            stats.update({f"coerced:{k}": v for k, v in buffer.coerced.items()})
            stats.update(buffer.tallies)
            write_shard(out_dir, index, rejects, table_name="rejects")
            write_shard_stats(out_dir, index, stats)
            write_shard(out_dir, index, docs)
        totals["documents"] += len(buffer)
        totals["rejects"] += len(buffer.rejects["reason"])
        buffer = _ShardBuffer()
        index += 1

    for item in items:
        if isinstance(item, Tally):
            buffer.tallies[item.key] = buffer.tallies.get(item.key, 0) + item.n
            continue
        if isinstance(item, Reject):
            buffer.add_reject(source, item)
        else:
            _accept(item, source, buffer, seen_docs, seen_ids)
        if on_record is not None:
            on_record(1)
        if len(buffer) >= config.docs_per_shard or buffer.chars >= config.shard_chars:
            flush()
    if len(buffer) or index == 0 or buffer.rejects["reason"] or buffer.tallies:
        flush()
    totals["shards"] = index
    return totals


def _accept(record: Record, source: str, buffer: _ShardBuffer, seen_docs: SeenKeys, seen_ids: SeenKeys) -> None:
    doc_id = make_doc_id(source, record.title, record.text)
    # The doc_id's digest is its key (exact within one source). A source id is keyed by its
    # 64-bit hash: a false "seen before" needs a collision (~1e-6 over 6M ids) and is a reject row.
    doc_key = int(doc_id.rsplit("-", 1)[1], 16)
    if doc_key in seen_docs:
        buffer.add_reject(source, Reject(record.location, "duplicate_document", f"same title and text as {doc_id}"))
        return
    if record.source_id is not None:
        if not seen_ids.add(xxhash.xxh3_64_intdigest(record.source_id.encode("utf-8", "surrogatepass"))):
            buffer.add_reject(source, Reject(record.location, "duplicate_id", f"id {record.source_id!r} seen before"))
            return
    seen_docs.add(doc_key)
    buffer.add_coerced(record.coerced)
    buffer.add_doc(
        doc_id=doc_id,
        source=source,
        title=record.title,
        text=record.text,
        source_id=record.source_id,
        location=record.location,
    )
