"""Page files written by hand for the ingest tests, no Debian package needed: `warc_record` frames a payload
as a WARC record, `http` makes an HTTP response for one, `pdf_bytes` writes a minimal PDF (a page per entry,
None a scan with no text layer), `with_outline` adds an outline to a PDF, and `TWO_PAGES` is two pages' text."""

from __future__ import annotations

import io


def warc_record(kind: str, uri: str, payload: bytes, n: int) -> bytes:
    head = (
        f"WARC/1.0\r\nWARC-Type: {kind}\r\nWARC-Target-URI: {uri}\r\nWARC-Date: 2026-01-0{n}T00:00:00Z\r\n"
        f"WARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-{n:012d}>\r\n"
        f"Content-Type: application/http; msgtype={kind}\r\nContent-Length: {len(payload)}\r\n\r\n"
    )
    return head.encode() + payload + b"\r\n\r\n"


def http(status: str, content_type: str, body: bytes, extra: str = "") -> bytes:
    return f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n{extra}\r\n".encode() + body


def pdf_bytes(pages: list[str | None]) -> bytes:
    """A minimal PDF written by hand: a page per entry, its lines drawn in Helvetica; None draws a filled box
    and no text (a scan has no text layer)."""
    n = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(n))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, text in enumerate(pages):
        if text is None:
            stream = b"0 0 1 rg 100 100 200 200 re f"
        else:
            shown = b" ".join(b"(" + line.encode("latin-1") + b") Tj T*" for line in text.split("\n"))
            stream = b"BT /F1 11 Tf 14 TL 40 740 Td " + shown + b" ET"
        resources = "/Resources << /Font << /F1 3 0 R >> >>"
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] {resources} /Contents {5 + 2 * i} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    return out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)


TWO_PAGES = [
    "Cache keys\nA cache key names one stored answer.\nTwo requests with the same key share it.",
    "Expiry\nEvery stored answer expires after its time to live.\nThe next request computes it again.",
]


def with_outline(data: bytes, entries: list[tuple[str, int]]) -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    for title, page in entries:
        writer.add_outline_item(title=title, page_number=page)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
