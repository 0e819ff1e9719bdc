"""The formats people keep pages in (HTML, WARC, PDF, Markdown, reST) read as documents per section, through the
same contracts as every reader: detection, forcing, per-file caching equal to a cold build, rejects naming the
file, and the held-out split reading them. Every file is generated here; no Debian package is needed."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage.fingerprint import canonical_json  # noqa: E402
from storage.manifest import read_manifest  # noqa: E402
from tasks.ingest.documents import IngestConfig  # noqa: E402
from tasks.ingest.read_summary import looks_like_markup, summary_lines  # noqa: E402
from tasks.ingest.readers import (  # noqa: E402
    CorpusFile,
    ReaderConfig,
    Record,
    Reject,
    Tally,
    file_format,
    read_corpus,
    read_member,
)
from tests.helpers.warc_pdf import TWO_PAGES, http, pdf_bytes, warc_record, with_outline

INTRO = "Caching keeps the answer to a costly request so that the next request for it is cheap. " * 3
KEYS = "A cache key names one stored answer; two requests with the same key share it. " * 3
EXPIRY = "Every stored answer expires after its time to live, and the next request computes it again. " * 3


def html_page(title: str, sections: list[tuple[str, str, str]], charset: str = "utf-8") -> bytes:
    """A page as sites serve it: navigation, a sidebar, a script, a footer, code; `sections` (tag, heading, text)."""
    body = "".join(f"<{tag}>{heading}</{tag}>\n<p>{text}</p>\n" for tag, heading, text in sections)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="{charset}"><title>{title} | Example Docs</title>
<script>var tracking = "navigation script text";</script><style>body {{ color: red; }}</style></head>
<body>
<header><nav><ul><li><a href="/">Home</a></li><li><a href="/docs">Documentation index</a></li></ul></nav></header>
<div class="sidebar"><h3>Related topics</h3><ul><li><a href="/a">Sidebar link one</a></li></ul></div>
<main><article>
{body}<pre>cache.set(key, value)  # never prose</pre>
</article></main>
<footer><p>Copyright 2026 Example Corp. All rights reserved.</p></footer>
</body></html>"""
    return page.encode(charset)


def guide_html(charset: str = "utf-8") -> bytes:
    return html_page(
        "Caching guide",
        [("h1", "Caching guide", INTRO), ("h2", "Cache keys", KEYS), ("h2", "Expiry café", EXPIRY)],
        charset,
    )


def warc_bytes(compress: bool = False) -> bytes:
    """Two HTML responses, a redirect and a request record (the crawler's own)."""
    other = html_page("Sessions", [("h1", "Sessions", KEYS.replace("cache", "session")), ("h2", "Cookies", EXPIRY)])
    records = [
        warc_record("request", "https://example.org/guide", b"GET /guide HTTP/1.1\r\nHost: example.org\r\n\r\n", 1),
        warc_record(
            "response", "https://example.org/guide", http("200 OK", "text/html; charset=utf-8", guide_html()), 2
        ),
        warc_record(
            "response", "https://example.org/old", http("301 Moved", "text/html", b"", "Location: /guide\r\n"), 3
        ),
        warc_record("response", "https://example.org/sessions", http("200 OK", "text/html", other), 4),
    ]
    return b"".join(gzip.compress(r, mtime=0) if compress else r for r in records)


MARKDOWN = """---
title: Front matter title
tags: [caching, never-prose]
---
# Caching guide

Caching keeps the *answer* to a costly request, see [the docs](https://example.org/docs).

```python
cache.set("never prose")
```

## Cache keys

A cache key names one stored answer; `key` is a string.

    indented code is not prose either

#### A deeper heading

Text under a deeper heading stays in its h2 section.

## Expiry

- every answer expires
- after its time to live
"""

RST = """Caching guide
=============

Caching keeps the answer to a costly request. See :func:`cache.get` and ``cache.set``::

    cache.set("never prose")

Cache keys
----------

A cache key names one stored answer.

.. code-block:: python

   key = "never prose"

.. note::
   Keys are strings.

Expiry
------

Every stored answer expires after its time to live.
"""


def records(items) -> list[Record]:
    return [item for item in items if isinstance(item, Record)]


DEFAULT = ReaderConfig()


def read_one(tmp_path: Path, name: str, data: bytes, config: ReaderConfig = DEFAULT) -> list:
    folder = tmp_path / "one"
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(data)
    return list(read_member(CorpusFile(folder / name, name, False), config, tallies=True))


def test_html_sections_have_their_headings_as_titles_and_no_navigation_script_footer_or_code(tmp_path):
    items = read_one(tmp_path, "guide.html", guide_html())
    docs = records(items)
    assert [d.title for d in docs] == ["Caching guide", "Cache keys", "Expiry café"]
    assert [d.source_id for d in docs] == ["guide.html#1", "guide.html#2", "guide.html#3"]
    assert [d.location for d in docs] == [f"guide.html:1 section {n}" for n in (1, 2, 3)]
    assert docs[0].text.strip() == INTRO.strip() and docs[1].text.strip() == KEYS.strip()
    every = " ".join(d.text + " " + (d.title or "") for d in docs)
    for boilerplate in ("Home", "Documentation index", "Sidebar link", "tracking", "color", "Copyright", "cache.set"):
        assert boilerplate not in every, boilerplate
    assert Tally("pages") in items and sum(1 for i in items if i == Tally("sections")) == 3


def test_the_section_numbers_a_generator_puts_in_headings_are_not_part_of_a_title(tmp_path):
    numbered = html_page(
        "4. Caching", [("h1", "4. Caching guide", INTRO), ("h2", "4.1. Cache keys", KEYS), ("h2", "3.14 keys", EXPIRY)]
    )
    docs = records(read_one(tmp_path, "guide.html", numbered))
    assert [d.title for d in docs] == ["Caching guide", "Cache keys", "3.14 keys"]  # no dot after it: a name
    # the reader's version is in an HTML file's key (its cached unit and mirror are read again), no other's
    from tasks.ingest.folder import FileUnit

    assert FileUnit("a.html", "a.html", "d1", "html", False).key()["digest"] == "d1+html-5"
    assert FileUnit("a.jsonl", "a.jsonl", "d1", "jsonl", False).key()["digest"] == "d1"


def test_a_section_named_after_its_heading_is_kept_whatever_the_name_says(tmp_path):
    """Generators give a section (or its heading) its heading's slug as id; resiliparse takes some words in ids
    ("related" among them) for boilerplate and dropped such sections whole. A block whose id is not
    its heading's name is still judged by it."""
    named = (
        f'<section id="related-work"><span id="related"></span><h2>4.2. Related work</h2><p>{KEYS}</p></section>\n'
        f'<h2 id="email-handling">Email handling</h2>\n<p>{EXPIRY}</p>\n'
        '<div id="related-posts"><h3>More to read</h3><p>Ten tips for faster pages, and more posts.</p></div>\n'
    )
    page = html_page("Caching guide", [("h1", "Caching guide", INTRO)]).replace(b"<pre>", named.encode() + b"<pre>")
    docs = records(read_one(tmp_path, "guide.html", page))
    assert [d.title for d in docs] == ["Caching guide", "Related work", "Email handling"]
    assert docs[1].text.strip() == KEYS.strip() and docs[2].text.strip() == EXPIRY.strip()
    assert "posts" not in " ".join(d.text for d in docs)


class _Links(dict):
    """`{name}` in a case: a Sphinx cross-reference to the function `name`."""

    def __missing__(self, name: str) -> str:
        return (
            f'<a class="reference internal" href="#shell.{name}" title="shell.{name}"><code class="xref py py-func '
            f'docutils literal notranslate"><span class="pre">{name}()</span></code></a>'
        )


def sphinx_page(cases: list[str]) -> bytes:
    """A page as Sphinx writes one: a method whose description holds a list of cases, each a sentence that names
    functions by link (`<li><p>`), beside a related-pages bar, a sidebar and a footer of links."""
    items = "".join(f"<li><p>{case.format_map(_Links())}</p></li>\n" for case in cases)
    return f"""<!DOCTYPE html><html><head><title>shell</title></head><body>
<div class="related" role="navigation"><ul><li><a href="index.html">Documentation home</a></li>
<li><a href="next.html">Following module</a></li></ul></div>
<div class="document"><div class="documentwrapper"><div class="bodywrapper"><div class="body" role="main">
<section id="module-shell"><h1>shell: base classes</h1>
<p>The shell module gives the building blocks for a read-eval-print loop in a program of your own.</p>
<section id="interpreter-objects"><h2>Interpreter objects</h2>
<dl class="py method"><dt id="shell.run_text">Interpreter.run_text(text)</dt>
<dd><p>Compile and run some text. The arguments are those of {_Links()["check"]}. One of three things happens:</p>
<ul class="simple">\n{items}</ul>
<p>The return value tells the caller which prompt to show next.</p></dd></dl></section></section></div></div></div>
<div class="sphinxsidebar" role="navigation"><h3>Navigation</h3><ul><li><a href="a.html">Previous topic</a></li>
<li><a href="b.html">Report a bug</a></li></ul></div></div>
<div class="footer">Copyright the authors.</div></body></html>""".encode()


def test_a_list_of_sentences_with_links_is_prose_and_a_list_of_links_is_navigation(tmp_path):
    """resiliparse took a list whose text is mostly links for navigation and dropped it, though each item is a
    paragraph (Sphinx's lists of cases and options); links in such items are read as their text. A menu of
    links is still navigation."""
    cases = [
        "The input is wrong; {check} raised an error ({parse} or {size}). A report is printed by {show}. {run} "
        "returns False.",
        "The input is partial, and more is needed; {check} returned None. {run} returns True.",
        "The input is whole; {check} returned a program. It runs by calling {execute} (which handles errors, "
        "except for {stop}). {run} returns False.",
    ]
    docs = records(read_one(tmp_path, "shell.html", sphinx_page(cases)))
    assert [d.title for d in docs] == ["shell: base classes", "Interpreter objects"]
    text = docs[1].text
    assert "The input is partial, and more is needed; check() returned None. run() returns True." in text
    assert text.count("The input is") == 3 and text.index("One of three") < text.index("The input is wrong")
    assert "(which handles errors, except for stop()). run() returns False." in text
    assert text.rstrip().endswith("which prompt to show next.")
    everything = " ".join(d.text for d in docs)
    for menu in ("Documentation home", "Following module", "Previous topic", "Report a bug", "Copyright"):
        assert menu not in everything


def test_docutils_footnotes_and_topics_are_text_and_a_sites_aside_is_not(tmp_path):
    """resiliparse drops every `<aside>` as a sidebar; docutils writes its footnotes and topics (an abstract) as
    asides. They are read; a page's own sidebar of links, and an unclosed aside, are not read into them."""
    page = b"""<!DOCTYPE html><html><head><title>notes</title></head><body><main>
<section id="notes"><h1>Release notes</h1>
<aside class="topic"><p class="topic-title">Abstract</p><p>This note says which caches a release empties.</p></aside>
<p>Every release empties the page cache.<a class="footnote-reference brackets" href="#f1">1</a></p>
<section id="upgrades"><h2>Upgrades</h2><p>An upgrade keeps the cache of sessions for one more day.</p>
<aside class="footnote-list brackets"><aside class="footnote brackets" id="f1"><span class="label">1</span>
<p>The session cache is kept because users would be signed out otherwise.</p></aside></aside>
</section></section></main>
<aside class="widget"><h3>Related posts</h3><ul><li><a href="/a">Caching in ten steps</a></li>
<li><a href="/b">Why sessions expire</a></li></ul></aside></body></html>"""
    docs = records(read_one(tmp_path, "notes.html", page))
    assert [d.title for d in docs] == ["Release notes", "Upgrades"]
    assert "This note says which caches a release empties." in docs[0].text
    assert "The session cache is kept because users would be signed out otherwise." in docs[1].text
    everything = " ".join(d.text for d in docs)
    assert "Related posts" not in everything and "Caching in ten steps" not in everything

    from tasks.ingest.html_text import _docutils_asides_as_divs

    nested = b'<aside class="sidebar"><aside class="footnote" id="x"><p>n</p></aside><p>side</p></aside>'
    assert _docutils_asides_as_divs(nested) == (
        b'<aside class="sidebar"><div class="footnote" id="x"><p>n</p></div><p>side</p></aside>'
    )
    unclosed = b'<aside class="topic"><p>t</p><aside class="nav"><p>m</p></aside>'
    assert _docutils_asides_as_divs(unclosed) == b'<div class="topic"><p>t</p><aside class="nav"><p>m</p></aside>'


def test_a_list_item_left_open_is_not_read_past_into_the_next():
    """HTML may leave `</p>` and `</li>` out; such an item's text is not a paragraph the pass can bound, and the
    pass never runs from it into later items (scanning to the page's end from each open item made a page of 4,000
    of them take seconds)."""
    from tasks.ingest.html_text import _unwrap_links_in_prose_items

    open_items = b"".join(b'<li><p>open %d <a href="#o">kept link</a>' % i for i in range(3))
    closed = b'<li class="x"><p>closed <a href="#c" title="t">bare</a> text</p>\n</li>'
    assert _unwrap_links_in_prose_items(b"<ul>" + open_items + closed + b"</ul>") == (
        b"<ul>" + open_items + b'<li class="x"><p>closed bare text</p>\n</li></ul>'
    )
    menu = b'<ul><li><a href="/">Home</a></li><li><a href="/docs">Docs</a></li></ul>'
    assert _unwrap_links_in_prose_items(menu) == menu  # items without a paragraph stay links


def test_an_html_page_in_its_declared_charset_and_one_undeclared_is_detected(tmp_path):
    docs = records(read_one(tmp_path, "latin.htm", guide_html("windows-1252")))
    assert docs[2].title == "Expiry café"
    undeclared = guide_html("windows-1252").replace(b'<meta charset="windows-1252">', b"")
    docs = records(read_one(tmp_path, "undeclared.html", undeclared))
    assert [d.title for d in docs][:2] == ["Caching guide", "Cache keys"] and "\ufffd" not in docs[1].text


def test_unit_page_is_one_document_per_page_titled_by_the_page(tmp_path):
    docs = records(read_one(tmp_path, "guide.html.gz", gzip.compress(guide_html()), ReaderConfig(unit="page")))
    assert len(docs) == 1 and docs[0].title == "Caching guide" and docs[0].source_id == "guide.html.gz"
    assert "Cache keys" in docs[0].text.splitlines() and KEYS.strip() in docs[0].text


@pytest.mark.parametrize("compress", [False, True])
def test_warc_html_200_responses_are_pages_with_their_url_and_other_records_are_counted_drops(tmp_path, compress):
    name = "crawl.warc.gz" if compress else "crawl.warc"
    items = read_one(tmp_path, name, warc_bytes(compress))
    docs = records(items)
    assert [d.source_id for d in docs] == [
        "https://example.org/guide#1", "https://example.org/guide#2", "https://example.org/guide#3",
        "https://example.org/sessions#1", "https://example.org/sessions#2",
    ]  # fmt: skip
    assert not [i for i in items if isinstance(i, Reject)]
    tallies = [i for i in items if isinstance(i, Tally)]
    assert tallies.count(Tally("pages")) == 2
    assert Tally("drop:warc_status_not_200") in tallies and Tally("drop:warc_not_response") in tallies


def test_pdf_text_per_page_one_document_or_one_per_outline_section_and_a_scan_is_a_reject(tmp_path):
    docs = records(read_one(tmp_path, "manual.pdf", pdf_bytes(TWO_PAGES)))
    assert len(docs) == 1 and docs[0].title == "manual"
    assert docs[0].text.splitlines() == [
        "Cache keys A cache key names one stored answer. Two requests with the same key share it.",
        "Expiry Every stored answer expires after its time to live. The next request computes it again.",
    ]
    outlined = with_outline(pdf_bytes(TWO_PAGES), [("Cache keys", 0), ("Expiry", 1)])
    items = read_one(tmp_path, "outlined.pdf", outlined)
    assert [(d.title, d.text) for d in records(items)] == [
        ("Cache keys", "A cache key names one stored answer. Two requests with the same key share it."),
        ("Expiry", "Every stored answer expires after its time to live. The next request computes it again."),
    ]
    assert Tally("pages", 2) in items
    scanned = read_one(tmp_path, "scan.pdf", pdf_bytes([None, None]))
    assert [(r.location, r.reason, r.detail) for r in scanned if isinstance(r, Reject)] == [
        ("scan.pdf:1", "no_text_layer", "no text layer: scanned?")
    ]
    broken = read_one(tmp_path, "broken.pdf", b"%PDF-1.4\nthis is not a pdf at all")
    assert [r.reason for r in broken if isinstance(r, Reject)] == ["unreadable_file"]
    assert "broken.pdf" in broken[-1].detail


def test_markdown_and_rst_sections_without_front_matter_or_code(tmp_path):
    docs = records(read_one(tmp_path, "guide.md", MARKDOWN.encode()))
    assert [d.title for d in docs] == ["Caching guide", "Cache keys", "Expiry"]
    assert docs[0].text == "Caching keeps the answer to a costly request, see the docs."
    assert docs[1].text.splitlines() == [
        "A cache key names one stored answer; key is a string.",
        "A deeper heading",
        "Text under a deeper heading stays in its h2 section.",
    ]
    assert docs[2].text.splitlines() == ["every answer expires", "after its time to live"]
    docs = records(read_one(tmp_path, "guide.rst", RST.encode()))
    assert [(d.title, d.text) for d in docs] == [
        ("Caching guide", "Caching keeps the answer to a costly request. See cache.get and cache.set:"),
        ("Cache keys", "A cache key names one stored answer.\nKeys are strings."),
        ("Expiry", "Every stored answer expires after its time to live."),
    ]
    every = " ".join(d.text for d in docs)
    assert "never" not in every and "Front matter" not in every


def test_formats_are_told_by_name_or_first_bytes_and_format_forces_one(tmp_path):
    files = {
        "page": guide_html(), "page.xhtml": guide_html(), "crawl": warc_bytes(), "crawl.gz": warc_bytes(True),
        "manual": pdf_bytes(TWO_PAGES), "notes.md": MARKDOWN.encode(), "notes.rst.txt": RST.encode(),
        "plain.txt": b"Just text.",
    }  # fmt: skip
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    found = {name: file_format(tmp_path / name) for name in files}
    assert found == {
        "page": "html", "page.xhtml": "html", "crawl": "warc", "crawl.gz": "warc", "manual": "pdf",
        "notes.md": "markdown", "notes.rst.txt": "rst", "plain.txt": "text",
    }  # fmt: skip
    assert file_format(tmp_path / "plain.txt", "html") == "html"
    forced = records(read_corpus(tmp_path / "notes.md", ReaderConfig(format="textdir")))
    assert len(forced) == 1 and forced[0].text.startswith("---")  # read as one plain-text document


def ingest(folder: Path, root: Path, config: IngestConfig) -> tuple[Path, dict]:
    from tasks.ingest.task import ingest as ingest_task

    ref = ingest_task.fn(str(folder), config, str(root), workers=1)
    ref = ref.data if hasattr(ref, "data") else ref
    return root / ref["path"], read_manifest(root / ref["path"])


def folder_bytes(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*.parquet"))}


def write_pages_folder(folder: Path) -> None:
    (folder / "site").mkdir(parents=True)
    (folder / "site" / "guide.html").write_bytes(guide_html())
    (folder / "crawl.warc.gz").write_bytes(warc_bytes(True))
    (folder / "manual.pdf").write_bytes(with_outline(pdf_bytes(TWO_PAGES), [("Cache keys", 0), ("Expiry", 1)]))
    (folder / "scan.pdf").write_bytes(pdf_bytes([None]))
    (folder / "notes.md").write_bytes(MARKDOWN.encode())


def test_a_folder_of_pages_after_a_new_file_equals_a_cold_build_and_counts_what_it_read(tmp_path):
    config = IngestConfig(ReaderConfig(), source_name="pages")
    corpus = tmp_path / "corpus"
    write_pages_folder(corpus)
    ingest(corpus, tmp_path / "root", config)
    (corpus / "guide.rst").write_bytes(RST.encode())
    grown, manifest = ingest(corpus, tmp_path / "root", config)
    assert manifest["file_work"] == {"read": 1, "reused": 5}
    cold, _ = ingest(corpus, tmp_path / "cold", config)
    assert folder_bytes(grown) == folder_bytes(cold)

    assert manifest["formats"] == {
        "html": {"files": 1, "pages": 1, "sections": 3, "documents": 0},  # crawl.warc.gz (earlier) has them
        "markdown": {"files": 1, "pages": 1, "sections": 3, "documents": 3},
        "pdf": {"files": 2, "pages": 3, "sections": 2, "documents": 2},
        "rst": {"files": 1, "pages": 1, "sections": 3, "documents": 3},
        "warc": {"files": 1, "pages": 2, "sections": 5, "documents": 5},
    }
    assert manifest["drops"]["warc_status_not_200"] == 1 and manifest["drops"]["no_text_layer"] == 1
    assert manifest["rows"]["rejects"] == 1 + 3  # the scan; three sections the WARC repeats from site/guide.html
    rejects = pq.read_table(grown / "rejects").to_pylist()
    assert {r["reason"] for r in rejects} == {"no_text_layer", "duplicate_document"}
    assert not manifest["markup"]["warn"]
    assert summary_lines(manifest)[0].startswith("formats: html: 1 file, 1 page, 3 sections, 0 documents;")


def test_a_folder_whose_documents_are_still_markup_ends_with_a_warning_naming_the_files(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("a.txt", "b.txt"):
        (corpus / name).write_bytes(guide_html().replace(b"<!DOCTYPE html>\n<html", b"<div><html"))
    (corpus / "c.txt").write_text("Plain prose about caching. " * 20)
    _, manifest = ingest(corpus, tmp_path / "root", IngestConfig(ReaderConfig(), source_name="markup"))
    assert manifest["markup"] == {"sampled": 3, "markup": 2, "warn": True, "files": ["a.txt", "b.txt"]}
    assert "a.txt, b.txt" in summary_lines(manifest)[-1] and summary_lines(manifest)[-1].startswith("warning:")
    assert looks_like_markup(guide_html().decode()) and not looks_like_markup(INTRO)


def test_the_held_out_split_reads_pages_with_the_page_as_label(tmp_path):
    from tasks.nightly.holdout import HoldoutConfig, split_file

    (tmp_path / "guide.html").write_bytes(guide_html())
    file = CorpusFile(tmp_path / "guide.html", "guide.html", False)
    part = split_file(file, HoldoutConfig(share=0.5, label_field="page"))
    rows = part.train + part.held
    assert sorted(r["title"] for r in rows) == ["Cache keys", "Caching guide", "Expiry café"]
    assert part.labelled and {r["label"] for r in part.held} <= {"guide.html"} and not part.rejects
    unlabelled = split_file(file, HoldoutConfig(share=0.5))
    assert not unlabelled.labelled and len(unlabelled.train + unlabelled.held) == 3


def test_a_unit_at_its_default_leaves_every_earlier_fingerprint_as_it_was():
    assert "unit" not in canonical_json(IngestConfig())
    assert '"unit":"page"' in canonical_json(IngestConfig(ReaderConfig(unit="page")))
    with pytest.raises(ValueError, match="unit"):
        ReaderConfig(unit="chapter")


def test_single_file_ingest_counts_its_format(tmp_path):
    path = tmp_path / "crawl.warc"
    path.write_bytes(warc_bytes())
    out, manifest = ingest(path, tmp_path / "root", IngestConfig(ReaderConfig(), source_name="crawl"))
    assert manifest["formats"] == {"warc": {"files": 1, "pages": 2, "sections": 5, "documents": 5}}
    assert manifest["drops"] == {"warc_not_response": 1, "warc_status_not_200": 1}
    titles = pa.concat_tables(pq.read_table(p) for p in sorted(out.glob("part-*.parquet"))).column("title")
    assert titles.to_pylist() == ["Caching guide", "Cache keys", "Expiry café", "Sessions", "Cookies"]
    shutil.rmtree(tmp_path / "root")
