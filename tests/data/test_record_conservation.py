"""Nothing lost without a count, in every input format: each input record is a document row or a reject row.

For each format the reader supports, an input mixes good records with bad ones (invalid UTF-8,
malformed JSON or rows, empty text, duplicates, oversized records, ...). The build-pairs flow runs
on it; the documents and rejects Parquet tables must add up to the input records, and the
ingest manifest's counts must be those of the tables.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.usefixtures("prefect_harness")

MAX_DOC_BYTES = 400  # small, so that one record per format is "too_large"
BIG = "Too long a document. " * 30  # 630 bytes

GOOD = [
    {"id": 1, "title": "Graphs", "text": "A graph has nodes. A graph has edges.\nEdges link nodes."},
    {"id": 2, "title": "模型", "text": "模型需要数据。数据来自文档！"},
    {"id": 3, "title": "Rivers", "text": "The river runs to the sea. The river runs past the city."},
]


def jsonl_line(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode() + b"\n"


def write_jsonl(path: Path) -> tuple[Path, dict, int, dict]:
    lines = [jsonl_line(d) for d in GOOD] + [
        jsonl_line({"id": 4, "title": 1999, "text": "A year of note. The year had notes."}),  # kept, title coerced
        b"\n",  # a blank separator line is no record
        b'{"id": 10, "title": "Caf\xe9", "text": "Latin-1 bytes."}\n',
        b'{"id": 11, "text": "no closing quote}\n',
        b"[1, 2, 3]\n",
        jsonl_line({"id": 12, "text": "   "}),
        jsonl_line({"id": 13, "body": "the text is in another field"}),
        jsonl_line({"id": 14, "text": 42}),
        b'{"id": 15, "text": "a lone surrogate \\ud800 here"}\n',
        jsonl_line({"id": 16, "text": BIG}),
        jsonl_line({"id": 1, "title": "Other", "text": "A new text under a used id."}),
        jsonl_line({**GOOD[0], "id": 17}),  # same title and text as id 1
    ]
    path.write_bytes(b"".join(lines))
    drops = {
        "invalid_utf8": 2,
        "malformed_json": 2,
        "empty_text": 1,
        "missing_text": 1,
        "text_not_string": 1,
        "too_large": 1,
        "duplicate_id": 1,
        "duplicate_document": 1,
    }
    return path, {}, 4 + 10, drops


def write_wiki2txt(path: Path) -> tuple[Path, dict, int, dict]:
    """wiki2txt's JSON lines (string ids, a url field), from a file whose name tells no format."""
    pages = [{**d, "id": str(d["id"]), "url": f"https://en.wikipedia.org/wiki?curid={d['id']}"} for d in GOOD]
    lines = [jsonl_line(p) for p in pages] + [
        jsonl_line({"id": "20", "url": "u", "title": "Stub", "text": ""}),
        jsonl_line({"id": "1", "url": "u", "title": "Again", "text": "Another page with the first id."}),
        b'{"id": "21", "url": "u", "title": "Cut", "text": "the dump ended mid-rec',
    ]
    path.write_bytes(b"".join(lines))
    return path, {"format": "wiki2txt"}, 3 + 3, {"empty_text": 1, "duplicate_id": 1, "malformed_json": 1}


def write_parquet(path: Path) -> tuple[Path, dict, int, dict]:
    rows = GOOD + [
        {"id": 30, "title": None, "text": None},
        {"id": 31, "title": "Blank", "text": " \n "},
        {"id": 32, "title": "Big", "text": BIG},
        {"id": 2, "title": "Reused", "text": "A text under the id of the second document."},
        {**GOOD[2], "id": 33},
    ]
    schema = pa.schema([("id", pa.int64()), ("title", pa.string()), ("text", pa.string())])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, row_group_size=3)
    return path, {}, len(rows), {"empty_text": 2, "too_large": 1, "duplicate_id": 1, "duplicate_document": 1}


def delimited(sep: bytes) -> tuple[bytes, int, dict]:
    def row(*fields: bytes) -> bytes:
        return sep.join(fields) + b"\n"

    records = [
        row(b"id", b"title", b"text"),  # the header is no record
        row(b"1", b"Graphs", b"A graph has nodes. A graph has edges."),
        row(b"2", b"Quoted", b'"A text that spans\ntwo lines, quoted."'),
        row(b"3", "模型".encode(), "模型需要数据。数据来自文档！".encode()),
        row(b"4", b"Caf\xe9", b"Latin-1 bytes in the title."),
        row(b"5", b"Extra", b"A row with one field too many.", b"surplus"),
        row(b"6", b"Short"),  # no text field at all
        row(b"7", b"Empty", b""),
        row(b"8", b"Big", BIG.encode()),
        row(b"1", b"Reused", b"A new text under a used id."),
        row(b"9", b"Graphs", b"A graph has nodes. A graph has edges."),
    ]
    drops = {
        "invalid_utf8": 1,
        "malformed_row": 1,
        "empty_text": 2,
        "too_large": 1,
        "duplicate_id": 1,
        "duplicate_document": 1,
    }
    return b"".join(records), len(records) - 1, drops


def write_csv(path: Path) -> tuple[Path, dict, int, dict]:
    data, n, drops = delimited(b",")
    path.write_bytes(data)
    return path, {}, n, drops


def write_tsv(path: Path) -> tuple[Path, dict, int, dict]:
    data, n, drops = delimited(b"\t")
    path.write_bytes(data)
    return path, {}, n, drops


def write_textdir(path: Path) -> tuple[Path, dict, int, dict]:
    files = {
        "graphs.txt": GOOD[0]["text"].encode(),
        "模型.txt": GOOD[1]["text"].encode(),
        "sub/rivers.txt": GOOD[2]["text"].encode(),
        "sub/packed.txt.gz": gzip.compress(b"A compressed file. It is read by its magic bytes."),
        "copy/graphs.txt": GOOD[0]["text"].encode(),  # same title (file stem) and text as graphs.txt
        "blank.txt": b"  \n\n",
        "latin1.txt": b"Caf\xe9 au lait.",
        "image.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
        "big.txt": BIG.encode(),
        ".DS_Store": b"\x00\x00\x00\x01Bud1",
        ".git/config": b"[core]\n",
    }
    for name, data in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)
    drops = {
        "duplicate_document": 1,
        "empty_text": 1,
        "invalid_utf8": 1,
        "binary_file": 1,
        "too_large": 1,
        "hidden_file": 2,
    }
    return path, {}, len(files), drops


def page(title: str, ns: int, page_id: int, markup: str) -> str:
    return (
        f"<page><title>{title}</title><ns>{ns}</ns><id>{page_id}</id>"
        f'<revision><id>{page_id}00</id><text xml:space="preserve">{markup}</text></revision></page>'
    )


def write_mediawiki(path: Path) -> tuple[Path, dict, int, dict]:
    pages = [
        page("Graphs", 0, 1, "'''A graph''' has [[node (graph)|nodes]]. A graph has edges.\n== Edges ==\nEdges."),
        page("模型", 0, 2, "模型需要数据。数据来自文档！"),
        page("Rivers", 0, 3, "The river runs to the sea. The river runs past the city."),
        page("Graph", 0, 4, "#REDIRECT [[Graphs]]"),
        page("Talk:Graphs", 1, 5, "Is this article accurate?"),
        page("Template only", 0, 6, "{{Infobox settlement|name=Nowhere}}"),
        page("Big", 0, 7, BIG),
        page("Reused", 0, 2, "Another page under the id of the second."),
        page("Rivers", 0, 8, "The river runs to the sea. The river runs past the city."),
    ]
    xml = '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">' + "".join(pages) + "</mediawiki>\n"
    path.write_text(xml, encoding="utf-8")
    drops = {
        "redirect": 1,
        "non_article_namespace": 1,
        "empty_text": 1,
        "too_large": 1,
        "duplicate_id": 1,
        "duplicate_document": 1,
    }
    return path, {}, len(pages), drops


def page_sections(kind: str) -> str:
    """Two good sections, one over MAX_DOC_BYTES and a repeat of the first (heading and text): 4 records."""
    sections = [("Graphs", GOOD[0]["text"]), ("Rivers", GOOD[2]["text"]), ("Big", BIG), ("Graphs", GOOD[0]["text"])]
    if kind == "html":
        body = "".join(f"<h2>{h}</h2><p>{t}</p>" for h, t in sections)
        return f"<!DOCTYPE html><html><head><title>T</title></head><body><main>{body}</main></body></html>"
    if kind == "markdown":
        return "".join(f"## {h}\n\n{t}\n\n" for h, t in sections)
    return "".join(f"{h}\n{'-' * len(h)}\n\n{t}\n\n" for h, t in sections)


PAGE_DROPS = {"too_large": 1, "duplicate_document": 1}


def write_page(kind: str):
    def write(path: Path) -> tuple[Path, dict, int, dict]:
        path.write_text(page_sections(kind), encoding="utf-8")
        return path, {}, 4, PAGE_DROPS

    return write


def write_warc(path: Path) -> tuple[Path, dict, int, dict]:
    """The same HTML page at two URLs: its 4 sections twice (the second copy's all duplicates)."""
    from tests.helpers.warc_pdf import http, warc_record

    body = page_sections("html").encode()
    records = [warc_record("response", f"https://a.example/{n}", http("200 OK", "text/html", body), n) for n in (1, 2)]
    path.write_bytes(b"".join(records))
    return path, {}, 8, {"too_large": 2, "duplicate_document": 1 + 3}


def write_pdf(path: Path) -> tuple[Path, dict, int, dict]:
    """An outline of two entries, one a page over MAX_DOC_BYTES: 2 records."""
    from tests.helpers.warc_pdf import TWO_PAGES, pdf_bytes, with_outline

    path.write_bytes(with_outline(pdf_bytes([TWO_PAGES[0], "Big\n" + BIG]), [("Cache keys", 0), ("Big", 1)]))
    return path, {}, 2, {"too_large": 1}


FORMATS = {
    "html": ("corpus.html", write_page("html")),
    "markdown": ("corpus.md", write_page("markdown")),
    "rst": ("corpus.rst", write_page("rst")),
    "warc": ("crawl.warc", write_warc),
    "pdf": ("manual.pdf", write_pdf),
    "jsonl": ("corpus.jsonl", write_jsonl),
    "wiki2txt": ("wiki2txt-output.txt", write_wiki2txt),
    "parquet": ("corpus.parquet", write_parquet),
    "csv": ("corpus.csv", write_csv),
    "tsv": ("corpus.tsv", write_tsv),
    "textdir": ("corpus", write_textdir),
    "mediawiki": ("dump.xml", write_mediawiki),
}


def read_parts(folder: Path) -> pa.Table:
    return pa.concat_tables(pq.read_table(p) for p in sorted(folder.glob("part-*.parquet")))


def test_every_reader_format_is_covered():
    from tasks.ingest.readers import FORMATS as READER_FORMATS

    assert set(FORMATS) == set(READER_FORMATS)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_input_record_is_a_document_or_a_reject(tmp_path, fmt):
    from flows.build_pairs import build_pairs
    from storage.manifest import read_manifest

    name, write = FORMATS[fmt]
    target = tmp_path / name
    if fmt == "textdir":
        target.mkdir()
    source, options, n_records, expected_drops = write(target)
    root = tmp_path / "data"
    refs = build_pairs(input_path=str(source), root=str(root), workers=1, max_doc_bytes=MAX_DOC_BYTES, **options)

    ingest_dir = root / refs["documents"]["path"]
    documents = read_parts(ingest_dir)
    rejects = read_parts(ingest_dir / "rejects")
    n_docs = n_records - sum(expected_drops.values())
    assert documents.num_rows + rejects.num_rows == n_records
    assert Counter(rejects["reason"].to_pylist()) == expected_drops
    assert documents.num_rows == n_docs and len(set(documents["doc_id"].to_pylist())) == n_docs
    assert set(rejects["stage"].to_pylist()) == {"ingest"} and all(rejects["location"].to_pylist())

    manifest = read_manifest(ingest_dir)
    assert manifest["rows"] == {"documents": documents.num_rows, "rejects": rejects.num_rows}
    assert manifest["drops"] == expected_drops
    # Every document reaches the sentences stage, which counts them again.
    assert read_manifest(root / refs["sentences"]["path"])["rows"]["documents"] == n_docs
