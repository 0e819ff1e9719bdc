"""Streaming corpus readers: each yields `Record`s and `Reject`s, one input record at a time.

Memory stays bounded by the largest single record (itself capped by `max_doc_bytes`), never
by the corpus size. Record-level problems become `Reject`s with a `file:line` location;
problems that make a whole file unreadable raise `CorpusError` naming the file.

A folder is a corpus of files, each read by its own format (`corpus_files`, `file_format`):
JSONL, CSV, TSV, Parquet and MediaWiki files, and the page formats (HTML, WARC, PDF, Markdown, reST:
`tasks/ingest/page_readers.py`, a document per section) by their name or first bytes, any other file as
one plain-text document, any of them gzip/bz2/zstd-compressed. `ReaderConfig.format` forces one
format for every file (`textdir`: every file is one text document).
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import ParseError, iterparse

import pyarrow as pa
import pyarrow.parquet as pq

from tasks.ingest.raw_bytes import _decompress, _open_binary, decode_text
from tasks.ingest.records import (
    COMPRESSED_SUFFIXES,
    FORMATS,
    PAGE_FORMATS,
    CorpusError,
    ReaderConfig,
    Record,
    Reject,
    Tally,
)


def format_from_name(name: str) -> str | None:
    """The format a file name says (a compression suffix is looked through), else None."""
    name = name.lower()
    for suffix in COMPRESSED_SUFFIXES:
        name = name.removesuffix(suffix)
    if name.endswith(".xml"):
        return "mediawiki"
    for suffix, fmt in ((".jsonl", "jsonl"), (".json", "jsonl"), (".parquet", "parquet"), (".csv", "csv")):
        if name.endswith(suffix):
            return fmt
    if name.endswith((".tsv", ".tab")):
        return "tsv"
    for suffixes, fmt in PAGE_SUFFIXES:
        if name.endswith(suffixes):
            return fmt
    return None


PAGE_SUFFIXES = (
    ((".html", ".htm", ".xhtml"), "html"),
    ((".warc",), "warc"),
    ((".pdf",), "pdf"),
    ((".md", ".markdown"), "markdown"),
    ((".rst", ".rst.txt"), "rst"),
)
_HTML_START = re.compile(rb"^(?:\xef\xbb\xbf)?\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html[\s>])", re.I | re.S)


def format_from_bytes(path: Path) -> str | None:
    """The format the first bytes say (after decompression), else None."""
    with open(path, "rb") as raw:
        magic = raw.read(5)
    if magic.startswith(b"PAR1"):
        return "parquet"
    if magic == b"%PDF-":
        return "pdf"
    with _open_binary(path) as stream:
        head = stream.read(512).lstrip()
    if head.startswith(b"<mediawiki") or (head.startswith(b"<?xml") and b"<mediawiki" in head):
        return "mediawiki"
    if head.startswith(b"{"):
        return "jsonl"
    if head.startswith(b"WARC/"):
        return "warc"
    if head.startswith(b"%PDF-"):
        return "pdf"
    if _HTML_START.match(head) or (head.startswith(b"<?xml") and b"<html" in head):
        return "html"
    return None


def detect_format(path: Path) -> str:
    """Guess a format from the path; `ReaderConfig.format` overrides it. A folder is `folder`: a corpus
    of files, each read by its own format (`file_format`)."""
    if path.is_dir():
        return "folder"
    fmt = format_from_name(path.name) or format_from_bytes(path)
    if fmt is None:
        raise CorpusError(f"{path}: cannot tell the format from the name; pass --format ({', '.join(FORMATS)})")
    return fmt


def file_format(path: Path, forced: str = "auto") -> str:
    """The format of one file of a corpus folder: `forced` unless `auto`, else its name, else its first
    bytes, else `text` (one plain-text document; `textdir` forces that for every file)."""
    if forced == "textdir":
        return "text"
    if forced != "auto":
        return forced
    return format_from_name(path.name) or format_from_bytes(path) or "text"


@dataclass(frozen=True)
class CorpusFile:
    """One file of a corpus folder: where it is, its path relative to the folder (`rel`, POSIX), and
    whether a dot-named part hides it (`.DS_Store`, `.git/...`: counted as a reject, never read)."""

    path: Path
    rel: str
    hidden: bool


def corpus_files(folder: Path) -> list[CorpusFile]:
    """Every file under `folder`, recursively, in sorted relative-path order."""
    files = []
    for path in folder.rglob("*"):
        if path.is_file():
            rel = path.relative_to(folder)
            files.append(CorpusFile(path, rel.as_posix(), any(part.startswith(".") for part in rel.parts)))
    return sorted(files, key=lambda f: f.rel)


def read_corpus(path: Path, config: ReaderConfig, tallies: bool = False) -> Iterator[Record | Reject]:
    """Every record of a file, or of every file of a folder in sorted order (each by its own format);
    `tallies`: the page readers' `Tally` items too (ingest counts them)."""
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path}: no such file or folder")
    if path.is_dir():
        return read_folder(path, config, tallies)
    fmt = detect_format(path) if config.format == "auto" else config.format
    items = read_file(path, config, fmt)
    return items if tallies else without_tallies(items)


def without_tallies(items: Iterator[Any]) -> Iterator[Record | Reject]:
    return (item for item in items if not isinstance(item, Tally))


def read_file(path: Path, config: ReaderConfig, fmt: str, label: str | None = None) -> Iterator[Record | Reject]:
    """Dispatch one file to the reader for `fmt`; `label` names it in locations (default: the path).
    A page format's reader also yields `Tally` items."""
    label = str(path) if label is None else label
    if fmt in PAGE_FORMATS:
        from tasks.ingest.page_readers import read_pages

        return read_pages(path, config, fmt, label)
    if fmt in ("jsonl", "wiki2txt"):
        return read_jsonl(path, config, label)
    if fmt == "parquet":
        return read_parquet(path, config, label=label)
    if fmt in ("csv", "tsv"):
        return read_delimited(path, config, delimiter="\t" if fmt == "tsv" else ",", label=label)
    if fmt == "mediawiki":
        return read_mediawiki(path, config, label)
    if fmt in ("text", "textdir"):
        return read_text_file(path, config, label, source_id=label)
    raise CorpusError(f"{path}: unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


def read_folder(folder: Path, config: ReaderConfig, tallies: bool = False) -> Iterator[Record | Reject]:
    """The records of every file of `folder`, in sorted order, each file by its own format; locations
    are relative to the folder. A hidden file is a reject; so is a file no reader can open (the message
    names it), so one bad file of many never hides the others."""
    for file in corpus_files(folder):
        yield from read_member(file, config, tallies)


def read_member(file: CorpusFile, config: ReaderConfig, tallies: bool = False) -> Iterator[Record | Reject]:
    """One file of a corpus folder as records and rejects (and `Tally` items when `tallies`); never raises
    `CorpusError`."""
    if file.hidden:
        yield Reject(f"{file.rel}:1", "hidden_file", "a dot-named file or folder is not read as a document")
        return
    last = ""  # the location of the last item read: a file that breaks mid-way is rejected where it broke
    try:
        for item in read_file(file.path, config, file_format(file.path, config.format), label=file.rel):
            if isinstance(item, Tally):
                if tallies:
                    yield item
                continue
            last = item.location
            yield item
    except CorpusError as exc:
        reason = "missing_field" if "no column" in str(exc) else "unreadable_file"
        yield Reject(stopped_at(file.rel, last), reason, str(exc).replace(str(file.path), file.rel))
    except (OSError, EOFError, ValueError) as exc:  # a truncated or corrupt compressed file, an unreadable one
        detail = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        yield Reject(stopped_at(file.rel, last), "unreadable_file", f"{file.rel}: {detail}")


def stopped_at(rel: str, last: str) -> str:
    """Where reading stopped: the line (or row) after the last one read, `rel:1` when none was."""
    found = re.search(r"(row )?(\d+)$", last)
    if not found:
        return f"{rel}:1"
    return f"{rel}:{found.group(1) or ''}{int(found.group(2)) + 1}"


# Compression is told by the first bytes, not the name: a gzip file named `.jsonl` is still read.
def _field(obj: dict, name: str) -> object:
    return obj.get(name) if name else None


def _record_from_fields(location: str, obj: dict, config: ReaderConfig) -> Record | Reject:
    if config.text_field not in obj:
        return Reject(location, "missing_text", f"no field {config.text_field!r}")
    text = obj[config.text_field]
    if text is None or (isinstance(text, str) and not text.strip()):
        return Reject(location, "empty_text", f"field {config.text_field!r} is empty")
    if not isinstance(text, str):
        return Reject(location, "text_not_string", f"field {config.text_field!r} is {type(text).__name__}")
    if len(text.encode("utf-8", "surrogatepass")) > config.max_doc_bytes:
        return Reject(location, "too_large", f"{len(text)} characters > max_doc_bytes={config.max_doc_bytes}")
    coerced = []
    title = _field(obj, config.title_field)
    if isinstance(title, (int, float)) and not isinstance(title, bool):
        title, coerced = str(title), [*coerced, "title_number"]  # a numeric title (e.g. a year) is still a title
    elif title is not None and not isinstance(title, str):
        title, coerced = json.dumps(title, ensure_ascii=False), [*coerced, "title_not_text"]
    title = title.strip() if isinstance(title, str) and title.strip() else None
    source_id = _field(obj, config.id_field)
    if isinstance(source_id, (list, dict)):
        source_id, coerced = json.dumps(source_id, ensure_ascii=False, sort_keys=True), [*coerced, "id_not_scalar"]
    source_id = None if source_id is None else str(source_id)
    label = _field(obj, getattr(config, "label_field", ""))
    label = None if label is None or isinstance(label, str) and not label.strip() else str(label).strip()
    for name, value in ((config.text_field, text), (config.title_field, title), (config.id_field, source_id)):
        # Undecodable bytes (CSV, read with surrogateescape) and lone surrogates (JSON "\ud800")
        # cannot be written as UTF-8: reject here rather than fail inside the Parquet writer.
        if value is not None and _has_surrogates(value):
            return Reject(location, "invalid_utf8", f"field {name!r} is not valid UTF-8")
    return Record(location, source_id, title, text, tuple(coerced), label)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_surrogates(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def _bounded_lines(stream, limit: int) -> Iterator[tuple[int, bytes | None, int]]:
    """Yield (line number, line bytes or None when longer than `limit`, byte length).

    An over-long line is skipped in chunks, so a one-line document of any length never sits in memory whole.
    """
    lineno = 0
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        lineno += 1
        if len(line) <= limit or line.endswith(b"\n"):
            yield lineno, line, len(line)
            continue
        size = len(line)
        while line and not line.endswith(b"\n"):
            line = stream.readline(1 << 20)
            size += len(line)
        yield lineno, None, size


def read_jsonl(path: Path, config: ReaderConfig, label: str | None = None) -> Iterator[Record | Reject]:
    """JSON Lines (also wiki2txt output: `{id, title, text, ...}`)."""
    label = str(path) if label is None else label
    with _open_binary(path) as stream:
        for lineno, raw, size in _bounded_lines(stream, config.max_doc_bytes):
            location = f"{label}:{lineno}"
            if raw is None:
                yield Reject(location, "too_large", f"line of {size} bytes > max_doc_bytes={config.max_doc_bytes}")
                continue
            if not raw.strip():
                continue  # blank separator lines are not records
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield Reject(location, "invalid_utf8", f"byte {exc.start}: {exc.reason}")
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                yield Reject(location, "malformed_json", f"column {exc.colno}: {exc.msg}")
                continue
            if not isinstance(obj, dict):
                yield Reject(location, "malformed_json", f"expected an object, got {type(obj).__name__}")
                continue
            yield _record_from_fields(location, obj, config)


def read_parquet(
    path: Path, config: ReaderConfig, batch_rows: int = 4096, label: str | None = None
) -> Iterator[Record | Reject]:
    """A Parquet file, read batch by batch."""
    label = str(path) if label is None else label
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise CorpusError(f"{path}: not a readable Parquet file ({exc})") from exc
    if config.text_field not in pf.schema_arrow.names:
        raise CorpusError(f"{path}: no column {config.text_field!r} (columns: {', '.join(pf.schema_arrow.names)})")
    wanted = (config.text_field, config.title_field, config.id_field, getattr(config, "label_field", ""))
    columns = [c for c in dict.fromkeys(wanted) if c and c in pf.schema_arrow.names]
    row = 0
    try:
        for batch in pf.iter_batches(batch_size=batch_rows, columns=columns):
            for obj in batch.to_pylist():
                row += 1
                yield _record_from_fields(f"{label}:row {row}", obj, config)
    except (pa.ArrowException, OSError) as exc:
        raise CorpusError(f"{path}: corrupt after row {row} ({exc})") from exc


def read_delimited(
    path: Path, config: ReaderConfig, delimiter: str, label: str | None = None
) -> Iterator[Record | Reject]:
    """CSV/TSV with a header row. Invalid UTF-8 rejects the record, not the file."""
    label = str(path) if label is None else label
    limit = min(sys.maxsize, max(config.max_doc_bytes * 2, 1 << 20))
    csv.field_size_limit(limit)  # bounds memory; fields between max_doc_bytes and this become rejects
    with _open_binary(path) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", newline="")
        # Quoted fields are parsed in TSV too (exports quote fields holding tabs or quotes); a quote
        # inside an unquoted field stays literal text.
        reader = csv.DictReader(text, delimiter=delimiter)
        if reader.fieldnames is None:
            return
        if config.text_field not in reader.fieldnames:
            raise CorpusError(f"{path}:1: no column {config.text_field!r} in header {reader.fieldnames}")
        start = 1
        try:
            for obj in reader:
                span = f"{start + 1}" if reader.line_num == start + 1 else f"{start + 1}-{reader.line_num}"
                location = f"{label}:{span}"
                start = reader.line_num
                if None in obj:
                    found = len(obj) - 1 + len(obj[None])
                    yield Reject(location, "malformed_row", f"{found} fields, header has {len(reader.fieldnames)}")
                    continue
                yield _record_from_fields(location, obj, config)
        except csv.Error as exc:
            if "field larger than field limit" in str(exc):
                raise CorpusError(
                    f"{path}:{start + 1}: a field of more than {limit:,} bytes; this reader will not load it"
                    f" (max_doc_bytes={config.max_doc_bytes:,}): raise --max-doc-bytes or split the record"
                ) from exc
            raise CorpusError(f"{path}:{reader.line_num}: {exc}") from exc


def read_text_file(path: Path, config: ReaderConfig, label: str, source_id: str) -> Iterator[Record | Reject]:
    """One plain-text file (compressed or not) as one document; binary files are rejected."""
    location = f"{label}:1"
    size = path.stat().st_size
    if size > config.max_doc_bytes:
        yield Reject(location, "too_large", f"{size} bytes > max_doc_bytes={config.max_doc_bytes}")
        return
    text = decode_text(_decompress(path.read_bytes()), location, label)
    if isinstance(text, Reject):
        yield text
        return
    if not text.strip():
        yield Reject(location, "empty_text", "file is empty")
        return
    title = None
    if config.textdir_title == "filename":
        title = path.stem
    elif config.textdir_title == "first_line":
        first, _, rest = text.strip().partition("\n")
        title, text = first.strip(), rest
        if not text.strip():
            yield Reject(location, "empty_text", "only a title line")
            return
    yield Record(location, source_id, title, text)


_HEADING = re.compile(r"^\s*=+[^=\n]*=+\s*$", re.MULTILINE)
_EMPHASIS = re.compile(r"'{2,}")
_BLANK_RUNS = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")


def clean_wikitext(markup: str) -> str:
    """Markup to plain text: gensim's `filter_wiki`, then headings and bold/italic quotes."""
    from gensim.corpora.wikicorpus import filter_wiki

    text = filter_wiki(markup)
    text = _HEADING.sub("", text)
    text = _EMPHASIS.sub("", text)
    return _BLANK_RUNS.sub("\n", text).strip()


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def read_mediawiki(path: Path, config: ReaderConfig, label: str | None = None) -> Iterator[Record | Reject]:
    """A MediaWiki XML dump (`.xml` or `.xml.bz2`), streamed page by page.

    Only main-namespace articles become documents; redirects and other namespaces are
    rejects with their own reason, so the counts add up to the pages in the dump.
    """
    label = str(path) if label is None else label
    page = 0
    try:
        with _open_binary(path) as stream:
            context = iterparse(stream, events=("start", "end"))
            _, root = next(context)
            for event, elem in context:
                if event != "end" or _local(elem.tag) != "page":
                    continue
                page += 1
                fields = {_local(child.tag): child for child in elem}
                title = (fields["title"].text or "").strip() if "title" in fields else ""
                ns = (fields["ns"].text or "0").strip() if "ns" in fields else "0"
                pageid = (fields["id"].text or "").strip() if "id" in fields else None
                text_elem = None
                if "revision" in fields:
                    text_elem = next((c for c in fields["revision"] if _local(c.tag) == "text"), None)
                markup = (text_elem.text or "") if text_elem is not None else ""
                location = f"{label}:page {page} ({title})"
                root.clear()  # drop finished pages: memory stays flat over a multi-GB dump
                if ns != "0":
                    yield Reject(location, "non_article_namespace", f"namespace {ns}")
                elif markup.lstrip()[:9].lower() == "#redirect":
                    yield Reject(location, "redirect", markup.strip()[:200])
                elif len(markup) > config.max_doc_bytes:
                    yield Reject(location, "too_large", f"{len(markup)} characters of markup")
                else:
                    text = clean_wikitext(markup)
                    if not text:
                        yield Reject(location, "empty_text", "no text after removing markup")
                    else:
                        yield Record(location, pageid, title or None, text)
    except (ParseError, EOFError, OSError) as exc:
        raise CorpusError(f"{path}: unreadable MediaWiki XML after page {page} ({exc})") from exc


DEMO_CORPUS = "test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def default_corpus() -> Path:
    """The embedded demo corpus: a ~200-page English Wikipedia dump sample shipped in gensim's wheel."""
    import gensim

    path = Path(gensim.__file__).parent / DEMO_CORPUS
    if not path.exists():
        raise CorpusError(f"{path}: the demo corpus is missing from this gensim install")
    return path
