"""Real pages of each documentation generator (samples/generator_pages/, copied from Debian packages) read as ingest
reads them: each h1-h3 heading that has prose is the title of a section, in the page's order, and no other section
has a title but a heading with text (links too: a table of contents under its heading may be a section or not), and
no tag or entity is left in the text.
The headings are the page's own, read by lxml independently of the reader (benchmarks/generator_ladder.py's
`page_truth`, what the generator ladder measures the same pages with)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tasks.ingest.html_text import html_page

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
from generator_ladder import markup_in, page_bytes, page_truth  # noqa: E402

SAMPLES = REPO / "samples" / "generator_pages"
# The pages that show a miss of the reader, with why (the generator ladder's entries in docs/results/ have the
# counts); each passes once the reader reads its generator's markup as written. html-7 read the last four: AsciiDoc's
# header, rustdoc's linked headings, javadoc's member lists, a hand-written list of features.
MISSES: dict[str, str] = {}
PAGES = sorted(path.relative_to(SAMPLES).as_posix() for path in SAMPLES.rglob("*.htm*"))


def in_order(part: list[str], whole: list[str]) -> bool:
    """Every item of `part` is in `whole`, in the same order (a subsequence)."""
    rest = iter(whole)
    return all(any(item == other for other in rest) for item in part)


def page_params() -> list:
    return [
        pytest.param(page, marks=pytest.mark.xfail(strict=True, reason=MISSES[page])) if page in MISSES else page
        for page in PAGES
    ]


def test_every_generator_has_a_sample_page_and_every_miss_names_one():
    generators = {page.split("/")[0] for page in PAGES}
    assert generators >= {"sphinx", "docbook-html", "docbook-xhtml", "texinfo", "asciidoc", "rustdoc", "mdbook"}
    assert generators >= {"javadoc", "doxygen", "mkdocs", "pandoc", "hand-written"}
    assert set(MISSES) <= set(PAGES)


@pytest.mark.parametrize("page", page_params())
def test_a_generators_headings_with_prose_are_the_sections_titles_without_markup(page):
    data = page_bytes(SAMPLES / page)
    truth = page_truth(data)
    sections = html_page(data).sections
    assert len(truth.headings) >= 3, "a sample page has headings to check"
    titles = [s.heading for s in sections if s.heading is not None]
    assert in_order(truth.headings, titles), f"headings with prose {truth.headings}, titles {titles}"
    assert in_order(titles, truth.headings_with_text), (
        f"titles {titles}, headings with text {truth.headings_with_text}"
    )
    leaked = markup_in("\n".join(f"{s.heading or ''}\n{s.text}" for s in sections)) - truth.shown_markup
    assert not leaked, f"markup in the text: {sorted(leaked)[:5]}"
