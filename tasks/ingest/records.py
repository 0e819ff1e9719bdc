"""What a corpus reader yields and how it is configured: `Record`, `Reject`, `Tally`, `CorpusError`, the
reader configs and the format names. Shared by the readers (tasks/ingest/readers.py) and the page readers
(tasks/ingest/page_readers.py), which import it and not each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from storage.fingerprint import HASHED_WHEN_SET

# Formats read as pages of headed sections (`ReaderConfig.unit`), by `tasks/ingest/page_readers.py`.
PAGE_FORMATS = ("html", "warc", "pdf", "markdown", "rst")
FORMATS = ("jsonl", "wiki2txt", "parquet", "csv", "tsv", "textdir", "mediawiki", *PAGE_FORMATS)
UNITS = ("section", "page")
# Formats whose records have named fields (`--text-field` and friends apply to them).
STRUCTURED = ("jsonl", "wiki2txt", "parquet", "csv", "tsv")
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".zst", ".zstd")
SNIFF_BYTES = 8192


class CorpusError(Exception):
    """The input cannot be read at all; the message names the file (and line when known)."""


@dataclass(frozen=True)
class ReaderConfig:
    """How to read one source. Field names apply to JSONL, Parquet and CSV/TSV."""

    format: str = field(
        default="auto", metadata={"help": "input format: " + ", ".join(FORMATS) + ", auto (from the name)"}
    )
    text_field: str = field(
        default="text",
        metadata={"help": "field/column with the document text (e.g. title for StackOverflow questions)"},
    )
    title_field: str = field(default="title", metadata={"help": "field/column with the title ('' for none)"})
    id_field: str = field(default="id", metadata={"help": "field/column with the source id"})
    max_doc_bytes: int = field(default=8_000_000, metadata={"help": "reject larger documents"})
    textdir_title: str = "filename"  # "filename", "first_line" or "none"
    unit: str = field(
        default="section",
        metadata={
            "help": "HTML, WARC, PDF, Markdown, reST: one document per h1-h3 section (PDF: outline section), "
            "or per page (file; WARC: response)",
            "choices": UNITS,
            HASHED_WHEN_SET: True,  # added later: at its default, fingerprints made before it stand
        },
    )

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"unit {self.unit!r}: expected one of {', '.join(UNITS)}")


@dataclass(frozen=True)
class Record:
    location: str
    source_id: str | None
    title: str | None
    text: str
    coerced: tuple[str, ...] = ()  # fields turned into text on the way in (counted in the manifest)
    label: str | None = None  # the label column's value, read only under a `LabelledReaderConfig`


@dataclass(frozen=True)
class LabelledReaderConfig(ReaderConfig):
    """A `ReaderConfig` that also reads one label column into `Record.label` (the nightly held-out split).
    A subclass, so that ingest's config, and every fingerprint made of it, never gains the field."""

    label_field: str = "tag"


@dataclass(frozen=True)
class Reject:
    location: str
    reason: str
    detail: str


@dataclass(frozen=True)
class Tally:
    """Something a page reader counted that is no record and no reject: a page read (`pages`), a WARC record
    that is not an HTML page (`drop:<reason>`). Summed into the manifest; `read_member` passes tallies on
    only when asked (`tallies=True`), so a caller that wants records and rejects never sees one."""

    key: str
    n: int = 1
