"""XHTML read as what it is: an element written self-closing (`<a id="x"/>`, as DocBook's XSL writes each
heading's anchor) is an empty element, not an open one that swallows the headings after it."""

from __future__ import annotations

from tasks.ingest.html_text import _closed_empty_elements, html_page

DOCBOOK_XHTML = b"""<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Chapter 2. Security</title></head><body>
<div class="chapter"><div class="titlepage"><div><div><h1 class="title"><a id="ch_security"/>Chapter 2. Security</h1>
</div></div></div><p>Security matters to every administrator who runs this service in production today.</p>
<div class="section"><div class="titlepage"><div><div><h2 class="title"><a id="_basic_precautions"/>2.1. Basic
precautions</h2></div></div></div><p>Keep the software updated and restrict who may log in at all times.</p></div>
<div class="section"><div class="titlepage"><div><div><h2 class="title"><a id="_firewalls"/>2.2. Firewalls</h2>
</div></div></div><p>A firewall drops the traffic no service of yours is meant to receive.<br/>It comes first.</p>
</div></div></body></html>"""


def test_self_closing_anchors_in_headings_leave_every_heading_its_section():
    page = html_page(DOCBOOK_XHTML)
    sections = [(s.heading, s.text) for s in page.sections if s.heading]
    assert [h for h, _ in sections] == ["Chapter 2. Security", "Basic precautions", "Firewalls"]
    assert sections[1][1] == "Keep the software updated and restrict who may log in at all times."
    assert sections[2][1] == "A firewall drops the traffic no service of yours is meant to receive.\nIt comes first."


def test_only_non_void_elements_are_closed_and_a_page_without_them_is_untouched():
    assert _closed_empty_elements(b'<p>a<br/>b<img src="x.png" /><a id="k"/><div class="c" /></p>') == (
        b'<p>a<br/>b<img src="x.png" /><a id="k"></a><div class="c"></div></p>'
    )
    plain = b"<html><body><h1>Title</h1><p>Text</p></body></html>"
    assert _closed_empty_elements(plain) is plain


def test_only_pages_the_upgrade_reads_differently_are_read_again(tmp_path):
    """The reader's version is in a file's key only where it changes what the file reads: an XHTML page is read
    again after the upgrade, an HTML page that only closes void elements (`<br/>`) keeps its cached unit."""
    import gzip

    from tasks.ingest.folder import READER_VERSIONS, content_key, page_reader_version

    (tmp_path / "chapter.xhtml.gz").write_bytes(gzip.compress(DOCBOOK_XHTML, mtime=0))
    (tmp_path / "page.html").write_bytes(b"<html><body><h1>T</h1><p>a<br/>b</p><img src='x.png'/></body></html>")
    assert page_reader_version(tmp_path / "chapter.xhtml.gz", "html") == "html-6"
    assert page_reader_version(tmp_path / "page.html", "html") is None
    assert page_reader_version(tmp_path / "chapter.xhtml.gz", "markdown") is None  # another reader: not its concern
    assert content_key("d", "html", "html-6") == "d+html-6"
    assert content_key("d", "html", None) == f"d+{READER_VERSIONS['html']}"


def test_a_heading_broken_by_br_stays_one_heading_and_its_page_is_read_again(tmp_path):
    """rustdoc writes an impl's `where` clause on a line of its own inside the heading: the heading spread over
    lines of the extracted text, and the reader took it for its section's text."""
    from tasks.ingest.folder import page_reader_version
    from tasks.ingest.html_text import breaks_a_heading

    page = (
        b"<html><body><main><h1>Trait Join</h1><p>Helper trait for joining slices of things together.</p>"
        b"<h2>Implementors</h2><p>The types that implement it, below.</p>"
        b"<h3>impl&lt;S&gt; Join&lt;&amp;str&gt; for [S] <span>where<br>&nbsp;&nbsp;S: Borrow&lt;str&gt;,</span></h3>"
        b"<p>Joins string slices with a separator between them.</p></main></body></html>"
    )
    headings = [s.heading for s in html_page(page).sections if s.heading]
    assert headings == ["Trait Join", "Implementors", "impl<S> Join<&str> for [S] where S: Borrow<str>,"]
    assert breaks_a_heading(page) and not breaks_a_heading(b"<h1>T</h1><p>a<br>b</p>")
    (tmp_path / "trait.Join.html").write_bytes(page)
    assert page_reader_version(tmp_path / "trait.Join.html", "html") == "html-6"
