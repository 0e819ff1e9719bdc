"""Each reader on small real files, and every kind of bad input the issue lists."""

from __future__ import annotations

import bz2
import json
import tracemalloc

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.ingest.readers import (
    CorpusError,
    ReaderConfig,
    Record,
    Reject,
    clean_wikitext,
    default_corpus,
    detect_format,
    read_corpus,
)


def split_items(items):
    items = list(items)
    return [i for i in items if isinstance(i, Record)], [i for i in items if isinstance(i, Reject)]


def test_jsonl_with_configurable_fields(tmp_path):
    path = tmp_path / "docs.jsonl"
    rows = [{"uid": 7, "headline": "First", "body": "Hello world. Bye."}, {"uid": 8, "body": "No title here."}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    config = ReaderConfig(text_field="body", title_field="headline", id_field="uid")
    records, rejects = split_items(read_corpus(path, config))
    assert rejects == []
    assert [(r.source_id, r.title, r.text) for r in records] == [
        ("7", "First", "Hello world. Bye."),
        ("8", None, "No title here."),
    ]
    assert records[1].location == f"{path}:2"


def test_wiki2txt_jsonl(tmp_path):
    path = tmp_path / "wiki.jsonl.bz2"
    line = json.dumps({"id": "12", "url": "u", "title": "Anarchism", "text": "Anarchism is a philosophy."})
    path.write_bytes(bz2.compress((line + "\n").encode()))
    records, _ = split_items(read_corpus(path, ReaderConfig(format="wiki2txt")))
    assert [(r.source_id, r.title) for r in records] == [("12", "Anarchism")]


def test_parquet_reader_and_row_locations(tmp_path):
    path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"title": ["a", None, "c"], "text": ["x y", "", "z"]}), path)
    records, rejects = split_items(read_corpus(path, ReaderConfig()))
    assert [r.text for r in records] == ["x y", "z"]
    assert [(r.location, r.reason) for r in rejects] == [(f"{path}:row 2", "empty_text")]


def test_csv_and_tsv(tmp_path):
    csv_path = tmp_path / "docs.csv"
    csv_path.write_text('title,text\nT1,"multi\nline, with comma"\nT2,plain\n', encoding="utf-8")
    records, _ = split_items(read_corpus(csv_path, ReaderConfig()))
    assert [(r.title, r.text, r.location) for r in records] == [
        ("T1", "multi\nline, with comma", f"{csv_path}:2-3"),
        ("T2", "plain", f"{csv_path}:4"),
    ]
    tsv_path = tmp_path / "so.tsv"
    tsv_path.write_text('text\ttags\nHow to "quote" in c#?\tc#\n"Use ""tabs""\tin text?"\tcsv\n', encoding="utf-8")
    records, _ = split_items(read_corpus(tsv_path, ReaderConfig(title_field="")))
    assert [r.text for r in records] == ['How to "quote" in c#?', 'Use "tabs"\tin text?']


def test_text_folder_rejects_binary_and_bad_utf8(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "a.txt").write_text("First doc.\nSecond line.", encoding="utf-8")
    (tmp_path / "b" / "c.txt").write_text("中文文档。", encoding="utf-8")
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (tmp_path / "latin1.txt").write_bytes(b"line one\ncaf\xe9\n")
    (tmp_path / ".hidden").write_text("ignored")
    records, rejects = split_items(read_corpus(tmp_path, ReaderConfig()))
    assert [(r.source_id, r.title) for r in records] == [("a.txt", "a"), ("b/c.txt", "c")]
    assert sorted((r.location.rsplit("/", 1)[-1], r.reason) for r in rejects) == [
        (".hidden:1", "hidden_file"),
        ("image.png:1", "binary_file"),
        ("latin1.txt:2", "invalid_utf8"),
    ]


@pytest.mark.parametrize("codec", ["gzip", "bz2", "zstd"])
def test_compressed_input_is_read_whatever_its_name(tmp_path, codec):
    import gzip

    raw = "".join(json.dumps({"id": i, "text": f"Doc {i}."}) + "\n" for i in range(3)).encode()
    if codec == "zstd":  # a framed .zst stream, as the zstd tool writes it
        sink = pa.BufferOutputStream()
        with pa.CompressedOutputStream(sink, "zstd") as out:
            out.write(raw)
        packed = sink.getvalue().to_pybytes()
    else:
        packed = gzip.compress(raw) if codec == "gzip" else bz2.compress(raw)
    (tmp_path / "docs.jsonl").write_bytes(packed)  # named as plain JSON Lines
    records, rejects = split_items(read_corpus(tmp_path / "docs.jsonl", ReaderConfig()))
    assert [r.text for r in records] == ["Doc 0.", "Doc 1.", "Doc 2."] and not rejects
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "a.txt").write_bytes(packed)
    # In a folder each file is read by its own format, found as for a single file: these bytes are JSON Lines.
    records, rejects = split_items(read_corpus(tmp_path / "folder", ReaderConfig()))
    assert [r.text for r in records] == ["Doc 0.", "Doc 1.", "Doc 2."] and not rejects
    assert [r.location for r in records] == ["a.txt:1", "a.txt:2", "a.txt:3"]
    # `textdir` reads every file of the folder as one plain-text document, decompressed.
    records, rejects = split_items(read_corpus(tmp_path / "folder", ReaderConfig(format="textdir")))
    assert len(records) == 1 and records[0].text.startswith('{"id": 0') and not rejects


def test_coerced_fields_are_kept_and_counted(tmp_path):
    path = tmp_path / "docs.jsonl"
    rows = [
        {"id": 1, "title": 1984, "text": "A novel."},
        {"id": ["idlist"], "title": "T", "text": "Listed id."},
        {"id": 3, "title": "Plain", "text": "Nothing coerced."},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    records, _ = split_items(read_corpus(path, ReaderConfig()))
    assert [(r.title, r.source_id, r.coerced) for r in records] == [
        ("1984", "1", ("title_number",)),
        ("T", '["idlist"]', ("id_not_scalar",)),
        ("Plain", "3", ()),
    ]


def test_mediawiki_reader_counts_every_page(tmp_path):
    xml = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">
<siteinfo><sitename>W</sitename></siteinfo>
<page><title>Cat</title><ns>0</ns><id>1</id><revision><text>'''Cat''' is an [[animal]].
== Biology ==
Cats purr.</text></revision></page>
<page><title>Kitty</title><ns>0</ns><id>2</id><revision><text>#REDIRECT [[Cat]]</text></revision></page>
<page><title>Talk:Cat</title><ns>1</ns><id>3</id><revision><text>chat</text></revision></page>
</mediawiki>"""
    path = tmp_path / "tiny.xml.bz2"
    path.write_bytes(bz2.compress(xml.encode()))
    assert detect_format(path) == "mediawiki"
    records, rejects = split_items(read_corpus(path, ReaderConfig()))
    assert [(r.title, r.text, r.source_id) for r in records] == [("Cat", "Cat is an animal.\nCats purr.", "1")]
    assert [r.reason for r in rejects] == ["redirect", "non_article_namespace"]


def test_demo_corpus_is_the_gensim_wikipedia_sample():
    records, rejects = split_items(read_corpus(default_corpus(), ReaderConfig()))
    assert len(records) > 100 and len(records) + len(rejects) == 206
    assert {"Anarchism", "Autism", "Alabama"} <= {r.title for r in records}
    assert all("'''" not in r.text and "[[" not in r.text for r in records)


def test_clean_wikitext_removes_markup():
    assert clean_wikitext("'''Bold''' and [[link|shown]] {{cite}}.\n==H==\nNext.") == "Bold and shown .\nNext."


def test_jsonl_bad_records_become_rejects_with_line_numbers(tmp_path):
    path = tmp_path / "bad.jsonl"
    lines = [
        b'{"text": "good one"}',
        b'{"text": "broken',
        b'{"title": "no text"}',
        b'{"text": "   "}',
        b'{"text": "caf\xe9"}',
        b"[1, 2]",
        b'{"text": 42}',
        b'{"text": "good two"}',
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    records, rejects = split_items(read_corpus(path, ReaderConfig()))
    assert [r.text for r in records] == ["good one", "good two"]
    assert [(r.location, r.reason) for r in rejects] == [
        (f"{path}:2", "malformed_json"),
        (f"{path}:3", "missing_text"),
        (f"{path}:4", "empty_text"),
        (f"{path}:5", "invalid_utf8"),
        (f"{path}:6", "malformed_json"),
        (f"{path}:7", "text_not_string"),
    ]


def test_csv_invalid_utf8_and_ragged_rows_are_rejected(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_bytes(b"title,text\nok,fine text\nbad,caf\xe9\nx,y,extra\n")
    records, rejects = split_items(read_corpus(path, ReaderConfig()))
    assert [r.text for r in records] == ["fine text"]
    assert [(r.location, r.reason) for r in rejects] == [(f"{path}:3", "invalid_utf8"), (f"{path}:4", "malformed_row")]


def test_undecodable_text_in_any_field_is_a_reject_not_a_crash(tmp_path):
    """A JSON escape of a lone surrogate and invalid UTF-8 in a CSV title cannot be written as
    UTF-8 Parquet: they are rejected where they are read, naming the field."""
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text('{"text": "ok"}\n{"text": "lone \\ud800 half"}\n{"title": "t\\udfff", "text": "fine"}\n')
    records, rejects = split_items(read_corpus(jsonl, ReaderConfig()))
    assert [r.text for r in records] == ["ok"]
    assert [(r.location, r.reason, r.detail) for r in rejects] == [
        (f"{jsonl}:2", "invalid_utf8", "field 'text' is not valid UTF-8"),
        (f"{jsonl}:3", "invalid_utf8", "field 'title' is not valid UTF-8"),
    ]
    csv_path = tmp_path / "t.csv"
    csv_path.write_bytes(b"title,text\ncaf\xe9,good text\nfine,more text\n")
    records, rejects = split_items(read_corpus(csv_path, ReaderConfig()))
    assert [r.text for r in records] == ["more text"]
    assert [(r.location, r.reason) for r in rejects] == [(f"{csv_path}:2", "invalid_utf8")]


def test_csv_field_over_the_parser_limit_stops_naming_its_line(tmp_path):
    path = tmp_path / "big.csv"
    path.write_text('title,text\nA,"short"\nB,"' + "x" * 3_000_000 + '"\nC,after\n')
    with pytest.raises(CorpusError, match=r"big.csv:3: a field of more than 2,000,000 bytes"):
        list(read_corpus(path, ReaderConfig(max_doc_bytes=1_000_000)))
    records, rejects = split_items(read_corpus(path, ReaderConfig(max_doc_bytes=2_000_000)))
    assert [r.text for r in records] == ["short", "after"]  # between the two limits: a reject
    assert [(r.location, r.reason) for r in rejects] == [(f"{path}:3", "too_large")]


def test_truncated_parquet_stops_with_the_file_name(tmp_path):
    path = tmp_path / "cut.parquet"
    pq.write_table(pa.table({"text": [f"document {i}" for i in range(1000)]}), path)
    path.write_bytes(path.read_bytes()[:-200])
    with pytest.raises(CorpusError, match="cut.parquet"):
        list(read_corpus(path, ReaderConfig()))


def test_missing_column_and_unknown_format_are_clear_errors(tmp_path):
    path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"body": ["x"]}), path)
    with pytest.raises(CorpusError, match="no column 'text'"):
        list(read_corpus(path, ReaderConfig()))
    odd = tmp_path / "docs.bin"
    odd.write_bytes(b"\x00\x01")
    with pytest.raises(CorpusError, match="docs.bin: cannot tell the format"):
        list(read_corpus(odd, ReaderConfig()))
    with pytest.raises(CorpusError, match="no such file"):
        list(read_corpus(tmp_path / "nope.jsonl", ReaderConfig()))


def test_50mb_one_line_document_is_rejected_without_loading_it(tmp_path):
    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as f:
        f.write(b'{"text": "small"}\n{"text": "')
        chunk = b"word " * 200_000  # 1 MB
        for _ in range(50):
            f.write(chunk)
        f.write(b'"}\n{"text": "after"}\n')
    tracemalloc.start()
    records, rejects = split_items(read_corpus(path, ReaderConfig(max_doc_bytes=8_000_000)))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [r.text for r in records] == ["small", "after"]
    assert [(r.location, r.reason) for r in rejects] == [(f"{path}:2", "too_large")]
    assert peak < 20_000_000, f"peak {peak} bytes: the long line was held in memory"
