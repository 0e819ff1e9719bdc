"""html-7: what resiliparse's main-content rules took for a site's chrome is read as the content it is (a list of
prose anywhere on the page, a heading whose words are links, a title block in a "header"), while menus and banners
stay out; and only the pages it reads otherwise carry its version in their key, told once per page."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tasks.ingest.html_text import html_page, reader_version, reads_anew_in_7
from tasks.ingest.main_content_rules import headings_without_links, lists_as_prose, title_blocks_kept

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "generator_pages"

# Pandoc's standalone HTML: the body holds the text, its lists straight under <body>; the menu is a <ul> of links.
PANDOC = b"""<!DOCTYPE html><html><head><title>Other languages</title></head><body>
<ul><li><a href="index.html">Home</a></li><li><a href="news.html">News</a></li></ul>
<h1>Functional programming in other languages</h1>
<p>purrr draws inspiration from many related tools:</p>
<ul>
<li><p>List operations defined in the Haskell <a href="https://hackage.haskell.org">prelude</a></p></li>
<li><p>rlist, another R package to support working with lists, with somewhat different goals.</p></li>
</ul>
<ul><li>Instead of currying, we use the dots to pass in extra arguments.</li>
<li>Instead of point free style, we use the pipe to write code read from left to right.</li></ul>
</body></html>"""

# javadoc's member details: each field a section in a list item, its signature and see-also mostly links.
JAVADOC = b"""<html><body><div class="flex-box"><div class="flex-content"><main><h1>Class BooleanUtils</h1>
<p>Operations on boolean primitives and Boolean objects in this utility class.</p>
<section class="details"><h2>Field Details</h2><ul class="member-list"><li><section class="detail" id="FALSE">
<h3>FALSE</h3><div class="member-signature">public static final <a href="String.html">String</a> FALSE</div>
<div class="block">The false String.</div><dl class="notes"><dt>See Also:</dt><dd><ul class="see-list">
<li><a href="constant-values.html">Constant Field Values</a></li></ul></dd></dl></section></li></ul></section>
</main></div></div></body></html>"""

# rustdoc: an item's path in the h1, each part a link, inside div.main-heading; an impl whose where clause ends in
# a no-break space after its last link.
RUSTDOC = b"""<html><body class="rustdoc trait"><main><div class="width-limiter"><section id="main-content">
<div class="main-heading"><h1 class="fqn"><span class="in-band">Trait <a href="../index.html">std</a>::<wbr><a
href="index.html">async_iter</a>::<wbr><a class="trait" href="#">AsyncIterator</a></span></h1></div>
<p>An interface for dealing with asynchronous iterators of values.</p>
<h2 id="implementors">Implementors<a href="#implementors" class="anchor"></a></h2>
<div class="impl"><h3 class="code-header">impl&lt;I&gt; <a href="trait.AsyncIterator.html">AsyncIterator</a> for
<a href="struct.FromIter.html">FromIter</a>&lt;I&gt; <span class="where">where<br>&nbsp;&nbsp;I:
<a href="../iter/trait.Iterator.html">Iterator</a>,&nbsp;</span></h3></div>
<p>Converts an iterator into an async iterator of the same items.</p>
</section></div></main></body></html>"""

# AsciiDoc's manual page: the title and the NAME section in div#header; a site's banner in another.
ASCIIDOC = b"""<html><body><div id="header"><h1>git-blame(1) Manual Page</h1><h2>NAME</h2>
<div class="sectionbody"><p>git-blame - Show what revision and author last modified each line of a file</p></div>
</div><div id="content"><h2>SYNOPSIS</h2><p>Annotates each line in the given file with the last revision.</p>
</div></body></html>"""
BANNER = b"""<html><body><div id="header"><h1><a href="/">Example Project</a></h1>
<p>The home of the example project and its many friendly tools.</p></div>
<div id="content"><h1>Installing</h1><p>Download the archive and unpack it in your home folder first.</p></div>
</body></html>"""


def texts(data: bytes) -> str:
    page = html_page(data)
    return "\n".join(f"{s.heading}\n{s.text}" for s in page.sections)


def test_a_list_of_prose_anywhere_on_the_page_is_read_and_a_menu_is_not():
    text = texts(PANDOC)
    assert "List operations defined in the Haskell prelude" in text
    assert "Instead of currying, we use the dots to pass in extra arguments." in text
    assert "Home" not in text and "News" not in text
    fixed = lists_as_prose(PANDOC)
    assert fixed.count(b"<ol>") == 2 and fixed.count(b"<ul>") == 1  # the menu stays a list of links


def test_a_list_whose_items_are_sections_is_read_with_its_headings():
    page = html_page(JAVADOC)
    assert [s.heading for s in page.sections] == ["Class BooleanUtils", "FALSE"]  # Field Details: no text of its own
    assert "The false String." in page.sections[1].text


def test_a_list_that_names_itself_navigation_stays_out_whatever_it_holds():
    menu = b'<html><body><ul class="navbar"><li>Read the manual from start to end, then the guides.</li></ul>'
    menu += b"</body></html>"
    assert lists_as_prose(menu) is menu


def test_a_headings_links_are_its_words_and_its_last_words_keep_their_comma():
    page = html_page(RUSTDOC)
    assert page.title == "Trait std::async_iter::AsyncIterator"
    titles = [s.heading for s in page.sections]
    assert titles == [
        "Trait std::async_iter::AsyncIterator",  # Implementors: no text of its own
        "impl<I> AsyncIterator for FromIter<I> where I: Iterator,",
    ]


def test_a_permalink_sign_is_left_as_it_is():
    sphinx = b'<h2>Caching<a class="headerlink" href="#caching" title="Link to this heading">\xc2\xb6</a></h2>'
    assert headings_without_links(sphinx) is sphinx


def test_a_title_block_called_header_is_read_and_a_banner_is_not():
    page = html_page(ASCIIDOC)
    assert page.title == "git-blame(1) Manual Page"
    assert [s.heading for s in page.sections] == ["NAME", "SYNOPSIS"]
    assert page.sections[0].text.startswith("git-blame - Show what revision")
    assert title_blocks_kept(BANNER) is BANNER  # its h1 is a link home
    assert html_page(BANNER).title == "Installing"


def test_the_key_names_html_7_only_where_it_reads_the_page_otherwise():
    for page in (PANDOC, JAVADOC, RUSTDOC, ASCIIDOC):
        assert reader_version(page) == "html-7"
    # a list html-7 writes as <ol>, that resiliparse kept anyway: the bytes change, the reading does not
    deep = b"<html><body><div><div><main><p>Intro words here.</p><ul><li>One plain item of text words.</li></ul>"
    deep += b"</main></div></div></body></html>"
    assert lists_as_prose(deep) != deep and not reads_anew_in_7(deep) and reader_version(deep) is None
    xhtml_only = b'<html><body><h1><a id="t"/>Title</h1><p>Some words of text.</p><h2><a id="u"/>Next</h2><p>More.</p>'
    assert reader_version(xhtml_only + b"</body></html>") == "html-6"


def test_a_night_tells_each_pages_version_once(tmp_path, monkeypatch):
    """The held-out mirror's index says which reader told each page's version: the next night takes it from there
    (telling it reads a page twice), and tells it again only for a page whose bytes changed."""
    import tasks.ingest.folder as folder
    from tasks.nightly.holdout import HoldoutConfig, split_corpus

    corpus = tmp_path / "site"
    shutil.copytree(SAMPLES, corpus)
    first = split_corpus(corpus, HoldoutConfig(), tmp_path / "root")
    told = []
    monkeypatch.setattr(folder, "reader_version", lambda data: told.append(data) or reader_version(data))
    again = split_corpus(corpus, HoldoutConfig(), tmp_path / "root")
    assert told == [] and again.counts["files_read"] == 0 and again.counts["train"] == first.counts["train"]
    page = next(corpus.rglob("*.html"))
    page.write_bytes(page.read_bytes() + b"\n<!-- edited -->\n")
    split_corpus(corpus, HoldoutConfig(), tmp_path / "root")
    assert len(told) == 1


@pytest.mark.parametrize("fixed", [lists_as_prose, headings_without_links, title_blocks_kept])
def test_a_page_without_what_a_rule_fixes_is_returned_untouched(fixed):
    plain = b"<html><body><p>Only a paragraph of words.</p></body></html>"
    assert fixed(plain) is plain


def test_a_build_of_a_folder_tells_each_pages_version_once(tmp_path, monkeypatch):
    """`gur build-pairs` on a folder of HTML pages: the next build takes the pages' versions from the last build's
    manifest and tells only a new page's."""
    import tasks.ingest.folder as folder
    from tasks.ingest.documents import IngestConfig
    from tasks.ingest.task import ingest

    site = tmp_path / "site"
    shutil.copytree(SAMPLES, site)
    ingest.fn(str(site), IngestConfig(), str(tmp_path / "root"), workers=1)
    told = []
    monkeypatch.setattr(folder, "reader_version", lambda data: told.append(data) or reader_version(data))
    (site / "new.html").write_bytes(PANDOC)
    ingest.fn(str(site), IngestConfig(), str(tmp_path / "root"), workers=1)
    assert told == [PANDOC]
