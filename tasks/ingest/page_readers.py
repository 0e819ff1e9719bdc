"""Readers for the formats people keep pages in: HTML, web archives (WARC), PDF, Markdown and reST.

    for page in pages of the file:                     # a file; a WARC's HTML 200 responses; a PDF
        title, sections = extract(page)                # html_text / markup_text / pdf_sections
        yield from page_records(page, title, sections) # a document per section (`unit = "page"`: per page)

Each section is a document: its heading is the `title`, the page it is on the start of `source_id`
(`<page>#<n>`: the file's path in the folder, or the record's URL), and under the held-out split's
`label_field = "page"` the page is the record's label. Besides records and rejects the readers yield
`Tally` items (pages read; WARC records that are not a page, counted as drops, not rejects), which
`read_member` hands on only to ingest.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

from tasks.ingest.markup_text import Section, markdown_page, rst_page
from tasks.ingest.raw_bytes import _decompress, _open_binary, compression_of, decode_text
from tasks.ingest.records import CorpusError, ReaderConfig, Record, Reject, Tally

HTML_TYPES = ("text/html", "application/xhtml+xml")
PDF_OUTLINE_DEPTH = 3  # outline entries this deep or less start a section (as h1-h3 do)
NO_TEXT_LAYER = "no text layer: scanned?"
PAGE_BYTES_PER_DOC = 8  # an HTML, Markdown or reST file may be this many times max_doc_bytes (its sections less)


def read_pages(path: Path, config: ReaderConfig, fmt: str, label: str) -> Iterator[Record | Reject | Tally]:
    """The documents of one HTML, WARC, PDF, Markdown or reST file."""
    if fmt == "warc":
        yield from read_warc(path, config, label)
        return
    data = _decompress(path.read_bytes())
    if fmt == "pdf":
        yield from read_pdf(data, config, label, page=label)
        return
    where = f"{label}:1"
    if len(data) > PAGE_BYTES_PER_DOC * config.max_doc_bytes:  # markup weighs more than its text
        limit = PAGE_BYTES_PER_DOC * config.max_doc_bytes
        yield Reject(where, "too_large", f"{len(data)} bytes > {limit} ({PAGE_BYTES_PER_DOC} x max_doc_bytes)")
        return
    if fmt == "html":
        from tasks.ingest.html_text import html_page

        page = html_page(data)
        title, sections = page.title, page.sections
    else:
        text = decode_text(data, where, label)
        if isinstance(text, Reject):
            yield text
            return
        title, sections = (markdown_page if fmt == "markdown" else rst_page)(text)
    yield from page_records(label, where, title or file_title(label), sections, config)


def file_title(label: str) -> str:
    """A page without a title of its own is named by its file, as a plain-text file is (`guide.md`: guide)."""
    name = Path(label).name
    return name.split(".")[0] or name


def page_records(
    page: str, where: str, title: str | None, sections: list[Section], config: ReaderConfig, pages: int = 1
) -> Iterator[Record | Reject | Tally]:
    """The documents of one page: a section each (`unit = "section"`), or the page whole (`"page"`, its
    headings as lines). A page without text is an `empty_text` reject. `pages` is what the page counts as
    (a PDF's pages)."""
    yield Tally("pages", pages)
    label = page if getattr(config, "label_field", "") == "page" else None
    if not sections:
        yield Reject(where, "empty_text", "no text after extraction")
        return
    if config.unit == "page":
        parts = []
        for section in sections:
            if section.heading and section.heading != title:
                parts.append(section.heading)
            parts.append(section.text)
        yield _record(where, page, title, "\n".join(parts), config, label)
        return
    for n, section in enumerate(sections, start=1):
        yield Tally("sections")
        yield _record(f"{where} section {n}", f"{page}#{n}", section.heading or title, section.text, config, label)


def _record(where: str, source_id: str, title: str | None, text: str, config: ReaderConfig, label: str | None):
    size = len(text.encode("utf-8", "replace"))
    if size > config.max_doc_bytes:
        return Reject(where, "too_large", f"{size} bytes of text > max_doc_bytes={config.max_doc_bytes}")
    return Record(where, source_id, title, text, (), label)


# --- web archives ---------------------------------------------------------------------------------------------


def read_warc(path: Path, config: ReaderConfig, label: str) -> Iterator[Record | Reject | Tally]:
    """Each HTML response with status 200 is a page (its URL the page); every other record is a counted
    drop: `warc_not_response` (warcinfo, request, metadata...), `warc_status_not_200` (a redirect, an
    error), `warc_not_html` (an image, a script). Streamed record by record (fastwarc)."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    from tasks.ingest.html_text import html_page

    with open(path, "rb") as raw:
        kind = compression_of(raw.read(4))
    stream = open(path, "rb") if kind in (None, "gzip") else _open_binary(path)  # fastwarc reads gzip itself
    with stream:
        records = ArchiveIterator(stream, parse_http=True, auto_decode="all", fsspec_args=False)
        for n, record in enumerate(records, start=1):
            where = f"{label}:record {n}"
            if record.record_type != WarcRecordType.response or not record.is_http:
                yield Tally("drop:warc_not_response")
                continue
            status = record.http_headers.status_code
            if status != 200:
                yield Tally("drop:warc_status_not_200")
                continue
            if (record.http_content_type or "").lower() not in HTML_TYPES:
                yield Tally("drop:warc_not_html")
                continue
            url = record.headers.get("WARC-Target-URI", "") or where
            if record.content_length > PAGE_BYTES_PER_DOC * config.max_doc_bytes:
                yield Tally("pages")
                limit = PAGE_BYTES_PER_DOC * config.max_doc_bytes
                yield Reject(
                    where,
                    "too_large",
                    f"{record.content_length} bytes > {limit} ({PAGE_BYTES_PER_DOC} x max_doc_bytes)",
                )
                continue
            page = html_page(record.reader.read(), record.http_charset)
            yield from page_records(url, where, page.title, page.sections, config)


# --- PDF ------------------------------------------------------------------------------------------------------

_HYPHENATED = re.compile(r"(\w)-\n(\w)")


def pdf_text(text: str) -> str:
    """A PDF page's extracted lines as running text: a word hyphenated at a line end joined, lines joined."""
    text = _HYPHENATED.sub(r"\1\2", text)
    return re.sub(r"\s+", " ", text).strip()


def read_pdf(data: bytes, config: ReaderConfig, label: str, page: str) -> Iterator[Record | Reject | Tally]:
    """A PDF's text per page (pypdf): one document per outline section (entries up to `PDF_OUTLINE_DEPTH`
    deep) where it has an outline, else per file; a PDF without a text layer is a reject."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    where = f"{label}:1"
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            yield Reject(where, "encrypted_pdf", "the PDF needs a password")
            return
        texts = [pdf_text(p.extract_text() or "") for p in reader.pages]
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise CorpusError(f"{label}: not a readable PDF ({type(exc).__name__}: {exc})") from exc
    if not any(texts):
        yield Tally("pages", len(texts))
        yield Reject(where, "no_text_layer", NO_TEXT_LAYER)
        return
    meta_title = reader.metadata.title if reader.metadata else None
    title = (meta_title or "").strip() or file_title(label)
    outline = pdf_outline(reader) if config.unit == "section" else []
    sections = outline_sections(texts, outline) if outline else [Section(None, 0, "\n".join(t for t in texts if t))]
    yield from page_records(page, where, title, sections, config, pages=len(texts))


def pdf_outline(reader) -> list[tuple[int, str, int]]:
    """(depth, title, page index) of each outline entry up to `PDF_OUTLINE_DEPTH` deep, in reading order."""
    found: list[tuple[int, str, int]] = []

    def walk(items: list, depth: int) -> None:
        for item in items:
            if isinstance(item, list):
                if depth < PDF_OUTLINE_DEPTH:
                    walk(item, depth + 1)
                continue
            try:
                index = reader.get_destination_page_number(item)
            except Exception:  # noqa: BLE001 - a broken destination is an entry without a page
                continue
            if index is not None and index >= 0 and str(item.title or "").strip():
                found.append((depth, str(item.title).strip(), index))

    try:
        walk(reader.outline, 1)
    except Exception:  # noqa: BLE001 - a broken outline: the PDF is read as one document
        return []
    return sorted(found, key=lambda e: e[2])


def outline_sections(texts: list[str], outline: list[tuple[int, str, int]]) -> list[Section]:
    """Sections cut from the pages' text where each outline entry starts: at its title on its page when the
    title is there, else at the page's start. Text before the first entry is a section of its own."""
    starts = [0]
    for text in texts:
        starts.append(starts[-1] + len(text) + 1)
    whole = "\n".join(texts)
    cuts: list[tuple[int, str, int]] = []  # (offset, title, level)
    for depth, heading, index in outline:
        page_start = starts[min(index, len(texts) - 1)]
        after = max(page_start, cuts[-1][0] if cuts else 0)
        found = whole.find(heading, after, starts[min(index + 1, len(texts))])
        offset = found if found >= 0 else after
        cuts.append((offset, heading, depth))
    sections = []
    head = whole[: cuts[0][0]].strip()
    if head:
        sections.append(Section(None, 0, head))
    for (offset, heading, depth), nxt in zip(cuts, [*cuts[1:], (len(whole), "", 0)], strict=True):
        text = whole[offset : nxt[0]]
        text = text[len(heading) :] if text.startswith(heading) else text
        if text.strip():
            sections.append(Section(heading, depth, text.strip()))
    return sections
