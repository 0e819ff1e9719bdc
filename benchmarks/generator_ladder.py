"""A ladder of documentation generators: how ingest reads each one's real pages, measured against each page's own
markup.

    .venv/bin/python benchmarks/generator_ladder.py [--cache DIR] [--sample 40] [--seed 0] [--rungs sphinx,texinfo]
    .venv/bin/python benchmarks/generator_ladder.py --pages DIR=RUNG [--pages DIR2=RUNG2]   # folders of your own

A documentation site is what users most often drop into a corpus folder. Each rung is real documentation from
Debian's main archive (bookworm), made by one generator; `--cache DIR` is where the packages are unpacked (default:
a temporary folder): a missing one is fetched with `apt-get download` and only the rung's folder is unpacked from it
(`dpkg-deb --fsys-tarfile | tar -x`), no dependencies and nothing installed. The versions read:

- `sphinx`: python3.11-doc 3.11.2-6+deb12u9, the Python documentation (`html/`, without `_sources`, `_static`);
- `docbook-html`: libpam-doc 1.5.2-6+deb12u3, the Linux-PAM guides (DocBook XSL, HTML 4 output, `<a name>` anchors);
- `docbook-xhtml`: maint-guide 1.2.53 and debian-reference-en 2.100, the Debian New Maintainers' Guide and the
  Debian Reference (DocBook XSL, XHTML 1.1 output with `<?xml` declarations and self-closing `<a id="..."/>`
  anchors inside the headings);
- `texinfo`: libgcrypt20-doc 1.10.1-3+deb12u1, the Libgcrypt manual (GNU Texinfo 6.8, a page per node);
- `asciidoc`: git-doc 1:2.39.5-0+deb12u3, Git's manual pages and guides (AsciiDoc 10.2.0; its two DocBook pages are
  left out by the generator's meta tag);
- `rustdoc`: rust-doc 1.63.0+dfsg1-2, the standard library's reference (`html/std/`, without redirect pages);
- `mdbook`: rust-doc 1.63.0+dfsg1-2, The Rust Programming Language book (`html/book/`, without `print.html`, the
  whole book again on one page, and redirect pages);
- `javadoc`: libcommons-lang3-java-doc 3.12.0-2+deb12u1, Apache Commons Lang's API (JDK 17 javadoc, without the
  `src-html/` source listings);
- `doxygen`: libjsoncpp-doc 1.9.5-4, JsonCpp's API (Doxygen 1.9.1, `doxygen.css`; without the `*_source.html`
  source listings);
- `mkdocs`: mkdocs-doc 1.4.2+dfsg-2, MkDocs's own documentation (MkDocs, its `mkdocs` theme);
- `pandoc`: the vignettes of r-cran-glue 1.6.2-1, r-cran-magrittr 2.0.3-1, r-cran-withr 2.5.0-1, r-cran-stringr
  1.5.0-1, r-cran-purrr 1.0.1-1 and r-cran-tidyr 1.3.0-1 (R Markdown's HTML, written by pandoc: the pages whose
  generator meta tag says pandoc);
- `hand-written`: lynx-common 2.9.0dev.12-1 (Lynx's help pages, `lynx_help/`, hand-written HTML 4, gzip-compressed
  as Debian ships them) and fetchmail 6.4.37-1 (its FAQ, features, design notes and to-do pages).
The version a run read is the one apt had (printed, and in the entry's JSON).

Each page of a rung's seeded sample (up to `--sample`) is read as `gur build-pairs` reads a corpus folder's file
(`tasks/ingest/readers.py: read_file` with the default `ReaderConfig`, its format from the name) and measured
against the page parsed on its own by lxml (its XML parser for a page that declares itself XML and parses as such,
else its HTML parser, which honours `<x/>`):
- the main content: the page's `<main>` (or `role="main"`), else its `<article>`, else `<body>`; without scripts,
  styles, `<pre>` code, forms and controls, `<nav>`, `<footer>`, and the elements a role (navigation, banner,
  contentinfo, complementary, search) or a class or id names as navigation (`NAVIGATION`: nav..., menu, toc,
  sidebar, related, breadcrumbs, header, footer, banner, titlearea, search) unless they hold an h1-h3 heading (a
  javadoc page's `div.header` holds its h1 and stays; Texinfo's holds the node's links and goes);
- headings with prose: its h1-h3 headings with words outside links before the next h1-h3 heading (an h4-h6
  heading's words count, since it stays in its section as a line; a heading over a list of links only, a table of
  contents, has none), normalized as the reader normalizes (blanks collapsed, a trailing permalink sign `¶`, `#`,
  `§` or an icon font's private-use character, and a leading section number ending in a dot dropped); `found` is
  the share of them that are the title of one of the page's documents (counted with multiplicity);
- recall: the main content's words (h1-h3 headings left out: they are titles) found in the documents' texts,
  counted with multiplicity, pooled over the sample; `pages >= .95` counts pages with recall of .95 or more;
- index pages: pages whose main content's words are half or more link text (a generated index, a class tree, a
  list of members); `found` and `recall` are given again without them, since the reader takes a list of links for
  navigation by design;
- markup: tags (`<p>`, `</div>`, `<a href=...>`) and entities (`&amp;`) in the documents' titles and texts beyond
  those the page itself shows as text (Git's manual pages write `<commit>` as words);
- navigation: the share of the documents' words that the main content does not hold but the rest of the page's
  body does (navigation, headers, footers, sidebars), counted with multiplicity; `not main`: the share of the
  documents' words that the main content does not hold at all (navigation, and anything else);
- the largest and the median document (characters of text) and documents per page.
The issue's targets, per rung: found >= .95, recall >= .95, no markup.
"""

from __future__ import annotations

import atexit
import gzip
import json
import random
import re
import shutil
import statistics
import subprocess
import tempfile
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import harness

FOUND_TARGET, RECALL_TARGET = 0.95, 0.95
PAGE_SUFFIXES = (".html", ".htm", ".xhtml", ".html.gz", ".htm.gz")
WORD = re.compile(r"[^\W_]+")
MARKUP = re.compile(r"</?[A-Za-z][A-Za-z0-9:-]*(?:\s[^<>]*)?/?>|&(?:[A-Za-z][A-Za-z0-9]*|#[0-9]+|#x[0-9A-Fa-f]+);")
# What a generator puts around a heading that is not its name: a permalink sign after (or an icon font's private-use
# character: MkDocs's theme), a section number before.
PERMALINK = "¶#§"
SECTION_NUMBER = re.compile(r"^\d+(?:\.\d+)*\.\s+(?=\S)")
BLANKS = re.compile(r"\s+")

# --- the page on its own: lxml's tree, its main content, its headings with prose ------------------------------

CODE_AND_MACHINERY = {"script", "style", "noscript", "template", "pre", "form", "button", "select", "textarea"}
# A class or id token that names navigation: whole (`toc`, `related`: Sphinx's bars), or as its start (`navheader`,
# `sidebar1`) or end (`main-nav`); `code-header` (rustdoc's signatures) names none.
NAVIGATION = re.compile(
    r"(?:nav\w*|\w+[-_]nav(?:igation)?|menu|\w+[-_]menu|toc|\w+[-_]toc|sidebar\w*|\w+[-_]sidebar|sphinxsidebar\w*"
    r"|related|breadcrumbs?|header|footer|\w+[-_]footer|banner|titlearea|search\w*)",
    re.I,
)
NAVIGATION_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search"}
HEADINGS = {"h1": 1, "h2": 2, "h3": 3}
BLOCK = {
    "address", "article", "aside", "blockquote", "body", "br", "caption", "dd", "details", "dialog", "div", "dl",
    "dt", "fieldset", "figcaption", "figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "html",
    "li", "main", "nav", "ol", "p", "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
}  # fmt: skip


def local(tag: object) -> str:
    """An element's name without its namespace (`{http://www.w3.org/1999/xhtml}h1`: h1); '' for a comment."""
    return tag.rsplit("}", 1)[-1].lower() if isinstance(tag, str) else ""


def parse_page(data: bytes):
    """The page's tree: lxml's XML parser where the page says it is XML (an `<?xml` declaration or the XHTML
    namespace) and parses as such, else its HTML parser."""
    from lxml import etree, html

    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    head = data[:2048].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"<?xml") or b'xmlns="http://www.w3.org/1999/xhtml"' in head:
        parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=True)
        try:
            return etree.fromstring(data, parser)
        except etree.XMLSyntaxError:
            pass  # an entity its DTD defines (&nbsp;), or not well-formed: read as HTML
    return html.document_fromstring(data)


def attribute(element, name: str) -> str:
    """An attribute's value, '' where missing (or on a comment)."""
    return (element.get(name) if isinstance(element.tag, str) else None) or ""


def is_navigation(element) -> bool:
    """`<nav>`, `<footer>`, or an element that a role, class or id names as navigation without an h1-h3 in it."""
    name = local(element.tag)
    if name in ("nav", "footer"):
        return True
    named = attribute(element, "role").lower() in NAVIGATION_ROLES or name == "header"
    tokens = f"{attribute(element, 'class')} {attribute(element, 'id')}".split()
    named = named or any(NAVIGATION.fullmatch(token) for token in tokens)
    return named and not any(local(e.tag) in HEADINGS for e in element.iter())


def main_element(root):
    """The page's `<main>` or `role="main"` element, else its `<article>`, else `<body>` (else the root)."""
    body = None
    for element in root.iter():
        name = local(element.tag)
        if name == "main" or attribute(element, "role").lower() == "main":
            return element
        body = element if name == "body" and body is None else body
    article = next((e for e in root.iter() if local(e.tag) == "article"), None)
    return article if article is not None else (body if body is not None else root)


def text_events(element, drop_navigation: bool) -> list[tuple[int, str, bool]]:
    """The element's text in reading order as (level, text, linked): an h1-h3 heading's whole text (level 1-3),
    else a piece of text (0; blocks separated by a space), `linked` where it is inside an `<a href>`. Code and
    machinery are left out, and navigation when `drop_navigation`."""
    events: list[tuple[int, str, bool]] = []

    def visit(node, linked: bool) -> None:
        name = local(node.tag)
        if name in HEADINGS:
            events.append((HEADINGS[name], "".join(inline_text(node)), linked))
            return
        linked = linked or (name == "a" and bool(attribute(node, "href")))
        block = " " if name in BLOCK else ""
        events.append((0, block + (node.text or ""), linked))
        for child in node:
            child_name = local(child.tag)
            if child_name and child_name not in CODE_AND_MACHINERY and not (drop_navigation and is_navigation(child)):
                visit(child, linked)
            events.append((0, child.tail or "", linked))
        events.append((0, block, linked))

    def inline_text(node) -> list[str]:
        pieces = [node.text or ""]
        for child in node:
            if local(child.tag) and local(child.tag) not in CODE_AND_MACHINERY:
                pieces += [" " if local(child.tag) in BLOCK else "", *inline_text(child)]
            pieces.append(child.tail or "")
        return pieces

    visit(element, False)
    return events


def visible_text(element) -> list[str]:
    """Every piece of text the page shows (scripts and styles are not shown), in order."""
    pieces = [] if local(element.tag) in ("script", "style") else [element.text or ""]
    for child in element:
        pieces += visible_text(child) if local(child.tag) else []
        pieces.append(child.tail or "")
    return pieces


def heading_text(text: str) -> str:
    """A heading as the reader titles a section: blanks collapsed, no permalink sign after, no section number."""
    text = BLANKS.sub(" ", text).strip()
    while text and (text[-1] in PERMALINK or unicodedata.category(text[-1]) == "Co"):  # an icon font's link sign
        text = text[:-1].rstrip()
    return SECTION_NUMBER.sub("", text)


def words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


@dataclass
class PageTruth:
    """What the page's own markup says: its headings with prose, its main content's words (prose, and headings),
    how many of the prose words are link text, its body's words, and the tags and entities it shows as text."""

    headings: list[str]  # the h1-h3 headings with prose: words outside links before the next h1-h3 heading
    headings_with_text: list[str]  # the h1-h3 headings with any words before the next one (links too)
    prose: Counter
    heading_words: Counter
    linked_words: int
    body: Counter
    shown_markup: Counter


def page_truth(data: bytes) -> PageTruth:
    """The page's own structure, read by lxml (`parse_page`), independently of the reader."""
    root = parse_page(data)
    events = text_events(main_element(root), drop_navigation=True)
    headings, headings_with_text, prose, heading_words = [], [], Counter(), Counter()
    heading, pieces, own = None, [], []  # the last h1-h3 heading, the text since, and that text outside links

    def close() -> None:
        found = words("".join(pieces))
        prose.update(found)
        if heading and found:
            headings_with_text.append(heading)
        if heading and WORD.search("".join(own)):
            headings.append(heading)

    for level, text, linked in events:
        if level:
            close()
            heading, pieces, own = heading_text(text) or None, [], []
            heading_words.update(words(text))
        else:
            pieces.append(text)
            own.append(" " if linked else text)
    close()
    linked = len(words(" ".join(text for level, text, link in events if link and not level)))
    body_element = next((e for e in root.iter() if local(e.tag) == "body"), root)
    body = Counter(words(" ".join(text for _, text, _ in text_events(body_element, drop_navigation=False))))
    shown = markup_in("".join(visible_text(root)))
    return PageTruth(headings, headings_with_text, prose, heading_words, linked, body, shown)


def markup_in(text: str) -> Counter:
    """The tags and entities in `text`, blanks collapsed (`<A\n  HREF=...>` as the reader's text writes it)."""
    return Counter(MARKUP.findall(BLANKS.sub(" ", text)))


# --- the rungs: packages, unpacked into the cache ----------------------------------------------------------


@dataclass(frozen=True)
class Part:
    package: str
    folder: str  # inside the package
    leave_out: tuple[str, ...] = ()  # regular expressions on the page's path inside `folder`
    generator: bytes = b""  # where set, only pages whose first 4 KB hold it (the generator's meta tag)


@dataclass(frozen=True)
class Rung:
    name: str
    parts: tuple[Part, ...]


R_VIGNETTES = ("glue", "magrittr", "withr", "stringr", "purrr", "tidyr")
RUNGS = (
    Rung("sphinx", (Part("python3.11-doc", "usr/share/doc/python3.11/html", (r"^_sources/", r"^_static/")),)),
    Rung("docbook-html", (Part("libpam-doc", "usr/share/doc/libpam-doc/html"),)),
    Rung(
        "docbook-xhtml",
        (
            Part("maint-guide", "usr/share/doc/maint-guide/html"),
            Part("debian-reference-en", "usr/share/debian-reference"),
        ),
    ),
    Rung("texinfo", (Part("libgcrypt20-doc", "usr/share/doc/libgcrypt20-doc/html"),)),
    Rung("asciidoc", (Part("git-doc", "usr/share/doc/git-doc", generator=b'content="AsciiDoc'),)),
    Rung("rustdoc", (Part("rust-doc", "usr/share/doc/rust-doc/html/std"),)),
    Rung("mdbook", (Part("rust-doc", "usr/share/doc/rust-doc/html/book", (r"^print\.html$",)),)),
    Rung("javadoc", (Part("libcommons-lang3-java-doc", "usr/share/doc/libcommons-lang3-java/api", (r"^src-html/",)),)),
    Rung("doxygen", (Part("libjsoncpp-doc", "usr/share/doc/libjsoncpp-doc", (r"_source\.html$",)),)),
    Rung("mkdocs", (Part("mkdocs-doc", "usr/share/doc/mkdocs/html"),)),
    Rung(
        "pandoc",
        tuple(
            Part(f"r-cran-{name}", f"usr/lib/R/site-library/{name}/doc", generator=b'content="pandoc')
            for name in R_VIGNETTES
        ),
    ),
    Rung(
        "hand-written",
        (
            Part("lynx-common", "usr/share/doc/lynx-common/lynx_help"),
            Part("fetchmail", "usr/share/doc/fetchmail", (r"^(?!.*\.html$)",)),
        ),
    ),
)


def unpacked(cache: Path, package: str, folders: set[str]) -> tuple[Path, str]:
    """`cache/<package>/`, with `folders` of the package unpacked there (fetched with `apt-get download` where the
    cache has not got them), and the package's version. `.unpacked` (its version and folders) is written last."""
    where, marker = cache / package, cache / package / ".unpacked"
    if marker.is_file():
        done = json.loads(marker.read_text())
        if folders <= set(done["folders"]):
            return where, done["version"]
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    found = sorted(debs.glob(f"{package}_*.deb"))
    if not found:
        fetched = subprocess.run(["apt-get", "download", package], cwd=debs, capture_output=True, text=True)
        found = sorted(debs.glob(f"{package}_*.deb"))
        if fetched.returncode or not found:
            raise SystemExit(f"apt-get download {package} failed (run `apt-get update` first?): {fetched.stderr}")
    deb = found[-1]
    version = subprocess.run(["dpkg-deb", "-f", deb, "Version"], capture_output=True, text=True, check=True)
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    tar = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", deb], stdout=subprocess.PIPE)
    wanted = [f"./{folder}/*" for folder in sorted(folders)]
    subprocess.run(["tar", "-x", "-C", where, "--wildcards", *wanted], stdin=tar.stdout, check=True)
    if tar.wait():
        raise SystemExit(f"dpkg-deb --fsys-tarfile {deb} failed")
    marker.write_text(json.dumps({"version": version.stdout.strip(), "folders": sorted(folders)}))
    return where, version.stdout.strip()


def is_redirect(data: bytes) -> bool:
    """A page that only sends the browser on (`<meta http-equiv="refresh">`: rustdoc's re-exports, moved pages)."""
    head = data[:2048].lower()
    return b'http-equiv="refresh"' in head or b"<title>redirection</title>" in head


def page_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def part_pages(folder: Path, part: Part) -> list[Path]:
    """The part's pages under `folder`: HTML files (compressed too), no links, no redirects, none left out."""
    pages = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink() or not path.is_file() or not rel.lower().endswith(PAGE_SUFFIXES):
            continue
        if any(re.search(pattern, rel) for pattern in part.leave_out):
            continue
        head = page_bytes(path)[:4096]
        if is_redirect(head) or (part.generator and part.generator not in head):
            continue
        pages.append(path)
    return pages


# --- reading a page as ingest does, and measuring it ---------------------------------------------------------


@dataclass
class PageScore:
    page: str
    headings: list[str]
    found: int
    missed: list[str]
    truth_words: int
    linked_words: int
    recalled: int
    out_words: int
    navigation_words: int
    not_main_words: int
    markup: int
    markup_sample: list[str]
    documents: list[int]  # characters of each document's text


def read_as_ingest(path: Path, label: str) -> list:
    """The page's records, read as `gur build-pairs` reads a file of a corpus folder."""
    from tasks.ingest.readers import ReaderConfig, Record, file_format, read_file, without_tallies

    config = ReaderConfig()
    items = without_tallies(read_file(path, config, file_format(path, config.format), label=label))
    return [item for item in items if isinstance(item, Record)]


def score_page(path: Path, label: str) -> PageScore:
    truth = page_truth(page_bytes(path))
    records = read_as_ingest(path, label)
    titles = [r.title or "" for r in records]
    found = sum((Counter(truth.headings) & Counter(titles)).values())
    missed = list((Counter(truth.headings) - Counter(titles)).elements())
    out = Counter(w for r in records for w in words(r.text))
    main = truth.prose + truth.heading_words
    navigation = truth.body - main
    surplus = out - main
    shown = markup_in("\n".join(f"{r.title or ''}\n{r.text}" for r in records)) - truth.shown_markup
    return PageScore(
        page=label,
        headings=truth.headings,
        found=found,
        missed=missed,
        truth_words=sum(truth.prose.values()),
        linked_words=truth.linked_words,
        recalled=sum((out & truth.prose).values()),
        out_words=sum(out.values()),
        navigation_words=sum((surplus & navigation).values()),
        not_main_words=sum(surplus.values()),
        markup=sum(shown.values()),
        markup_sample=sorted(shown)[:5],
        documents=[len(r.text) for r in records],
    )


def rung_figures(scores: list[PageScore]) -> dict:
    """The rung's figures over its sample (pooled: each page weighs by its headings or its words)."""
    headings = sum(len(s.headings) for s in scores)
    truth_words = sum(s.truth_words for s in scores)
    out_words = sum(s.out_words for s in scores)
    documents = [n for s in scores for n in s.documents]
    with_words = [s for s in scores if s.truth_words]
    prose_pages = [s for s in with_words if s.linked_words * 2 < s.truth_words]  # not an index of links
    prose_words = sum(s.truth_words for s in prose_pages)
    prose_headings = sum(len(s.headings) for s in prose_pages)
    found = sum(s.found for s in scores) / headings if headings else None
    recall = sum(s.recalled for s in scores) / truth_words if truth_words else None
    markup = sum(s.markup for s in scores)
    misses = [
        name
        for name, value, target in (("found", found, FOUND_TARGET), ("recall", recall, RECALL_TARGET))
        if value is not None and value < target
    ] + (["markup"] if markup else [])
    return {
        "pages": len(scores),
        "pages_without_documents": sum(1 for s in scores if not s.documents),
        "headings_with_prose": headings,
        "found": found,
        "recall": recall,
        "index_pages": len(with_words) - len(prose_pages),
        "found_prose_pages": sum(s.found for s in prose_pages) / prose_headings if prose_headings else None,
        "recall_prose_pages": sum(s.recalled for s in prose_pages) / prose_words if prose_words else None,
        "pages_recall_95": sum(1 for s in with_words if s.recalled >= RECALL_TARGET * s.truth_words),
        "pages_with_words": len(with_words),
        "markup": markup,
        "pages_with_markup": sum(1 for s in scores if s.markup),
        "navigation": sum(s.navigation_words for s in scores) / out_words if out_words else 0.0,
        "not_main": sum(s.not_main_words for s in scores) / out_words if out_words else 0.0,
        "documents": len(documents),
        "largest": max(documents, default=0),
        "median": int(statistics.median(documents)) if documents else 0,
        "documents_per_page": len(documents) / len(scores) if scores else 0.0,
        "misses": misses,
    }


def page_summary(score: PageScore) -> dict:
    """A page's row in the entry's JSON: its counts and what it missed, not every heading and document."""
    row = {k: v for k, v in vars(score).items() if k not in ("headings", "documents")}
    return {
        **row,
        "headings": len(score.headings),
        "documents": len(score.documents),
        "largest": max(score.documents, default=0),
    }


def share(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


TABLE = (
    "| rung | package | pages | headings with prose | found | recall | without index pages: found, recall "
    "(index pages) | pages >= .95 | markup | navigation | not main | largest | median | documents/page | targets |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
)


def table_row(name: str, packages: str, f: dict) -> str:
    empty = f" ({f['pages_without_documents']} empty)" if f["pages_without_documents"] else ""
    targets = "met" if not f["misses"] else "misses " + ", ".join(f["misses"])
    cells = [
        name,
        packages,
        f"{f['pages']}{empty}",
        f["headings_with_prose"],
        share(f["found"]),
        share(f["recall"]),
        f"{share(f['found_prose_pages'])}, {share(f['recall_prose_pages'])} ({f['index_pages']})",
        f"{f['pages_recall_95']}/{f['pages_with_words']}",
        f["markup"],
        f"{f['navigation']:.1%}",
        f"{f['not_main']:.1%}",
        f"{f['largest']:,}",
        f"{f['median']:,}",
        f"{f['documents_per_page']:.1f}",
        targets,
    ]
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def miss_lines(name: str, scores: list[PageScore], limit: int = 4) -> list[str]:
    """A rung's headings not found, its pages of lowest recall and its markup, for the reader's next fix."""
    lines = []
    missed = [(s.page, h) for s in scores for h in s.missed]
    if missed:
        shown = "; ".join(f"{page}: {heading!r}" for page, heading in missed[:limit])
        lines.append(f"- {name}: {len(missed)} headings not found, e.g. {shown}")
    low = sorted((s.recalled / s.truth_words, s.page) for s in scores if s.truth_words)
    low = [(r, p) for r, p in low if r < RECALL_TARGET][:limit]
    if low:
        lines.append(f"- {name}: lowest recall " + "; ".join(f"{page} {r:.2f}" for r, page in low))
    leaked = [(s.page, s.markup_sample) for s in scores if s.markup]
    if leaked:
        lines.append(f"- {name}: markup in " + "; ".join(f"{page} {sample}" for page, sample in leaked[:limit]))
    return lines


def given_sites(pages: list[str]) -> list[tuple[str, str, list[tuple[Path, str]]]]:
    """`--pages DIR=RUNG`: each folder's pages as a rung, (rung, folder, [(page, label)])."""
    sites = []
    for given in pages:
        folder, _, name = given.partition("=")
        found = part_pages(Path(folder), Part("", ""))
        sites.append((name or Path(folder).name, folder, [(p, p.relative_to(folder).as_posix()) for p in found]))
    return sites


def package_sites(cache: Path, rungs: list[Rung]) -> tuple[list[tuple[str, str, list[tuple[Path, str]]]], dict]:
    """The rungs' pages from their packages, unpacked in `cache` where missing; and the packages' versions."""
    needed: dict[str, set[str]] = {}
    for rung in rungs:
        for part in rung.parts:
            needed.setdefault(part.package, set()).add(part.folder)
    roots, versions = {}, {}
    for package, folders in needed.items():
        roots[package], versions[package] = unpacked(cache, package, folders)
    sites = []
    for rung in rungs:
        pages = []
        for part in rung.parts:
            folder = roots[part.package] / part.folder
            pages += [(p, f"{part.package}/{p.relative_to(folder).as_posix()}") for p in part_pages(folder, part)]
        packages = ", ".join(dict.fromkeys(f"{part.package}={versions[part.package]}" for part in rung.parts))
        sites.append((rung.name, packages, pages))
    return sites, versions


def main() -> None:
    p = harness.parser(__doc__, workdir=None)
    p.add_argument("--cache", default="", help="where the packages are unpacked (default: a temporary folder)")
    p.add_argument("--sample", type=int, default=40, help="pages per rung, a seeded sample (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default: %(default)s)")
    p.add_argument("--rungs", default="", help="comma-separated rung names (default: all)")
    p.add_argument("--pages", action="append", default=[], metavar="DIR=RUNG", help="read DIR's pages as rung RUNG")
    args = p.parse_args()

    # --- the rungs' pages
    versions: dict[str, str] = {}
    sites = given_sites(args.pages)
    if not args.pages:
        cache = Path(args.cache) if args.cache else Path(tempfile.mkdtemp(prefix="gur-generator-ladder-"))
        if not args.cache:
            atexit.register(shutil.rmtree, cache, ignore_errors=True)
        chosen = [r for r in RUNGS if not args.rungs or r.name in args.rungs.split(",")]
        sites, versions = package_sites(cache, chosen)

    # --- each rung's sample, read and measured
    show = harness.Lines()
    show(*TABLE)
    figures: dict = {"sample": args.sample, "seed": args.seed, "versions": versions, "rungs": {}}
    details: list[str] = []
    for name, packages, pages in sites:
        rng = random.Random(f"{args.seed}:{name}")
        sample = sorted(rng.sample(pages, min(args.sample, len(pages))), key=lambda x: x[1])
        scores = [score_page(page, label) for page, label in sample]
        f = rung_figures(scores)
        show(table_row(name, packages, f))
        per_page = [page_summary(s) for s in scores]
        figures["rungs"][name] = {"packages": packages, "site_pages": len(pages), **f, "per_page": per_page}
        details += miss_lines(name, scores)
    show(
        "",
        f"Targets: found >= {FOUND_TARGET}, recall >= {RECALL_TARGET}, no markup. A seeded sample of up to "
        f"{args.sample} pages a rung (seed {args.seed}); recall is multiset recall of the main content's words.",
    )
    if details:
        show("", "What each rung misses (first few):", "", *details)
    harness.record(args, "Documentation generators read by the HTML reader", show.lines, figures)


if __name__ == "__main__":
    main()
