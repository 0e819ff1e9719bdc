"""An HTML page -> its own title and its prose, cut into sections at its h1-h3 headings.

    page = html_page(data, declared)     # Page(title, sections), navigation, scripts, code dropped; the charset
                                         # from a BOM, else `declared` (HTTP), else <meta>, else detected

The main content is resiliparse's (`extract_plain_text(main_content=True)`: it drops navigation, headers,
footers, sidebars, scripts and styles by element, class and id; an id that only spells its section's heading
is removed first, `_drop_heading_ids`, and so are the links inside list items that are paragraphs,
`_unwrap_links_in_prose_items`; docutils' footnotes and topics are read as the content they are,
`_docutils_asides_as_divs`), in its minimal-HTML form, whose heading lines
say where each section starts; `<pre>` blocks are skipped (code is not prose). A section's text runs to the
next h1-h3 heading; deeper headings stay in it as lines. Sections do not nest: a document never repeats the
text of another, so the held-out split (a hash of each document's text) never has a sentence on both sides.
"""

from __future__ import annotations

import codecs
import html
import re
from dataclasses import dataclass

from tasks.ingest.main_content_rules import headings_without_links, lists_as_prose, title_blocks_kept
from tasks.ingest.markup_text import MAX_LEVEL, Section, sections_from_blocks

SKIPPED = ("pre",)  # code is not prose
HTML_6, HTML_7 = "html-6", "html-7"  # reader versions that read only some pages otherwise (`reader_version`)
_HEADING = re.compile(r"^\s*<h([1-6])>(.*)</h\1>\s*$")
_TAG = re.compile(r"<[^>]*>")
# The number a generator puts before a heading ("4.1. Specifying the files", Sphinx's :numbered: toctrees): the
# page's outline, not the section's name. A number without its dot ("3.14 Release notes") stays.
_SECTION_NUMBER = re.compile(r"^\d+(?:\.\d+)*\.\s+(?=\S)")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.I)
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
_BLANKS = re.compile(r"[ \t\u00a0]+")
_ID_TAG = re.compile(rb"<(section|div|article|h[1-6])\b([^<>]*)>", re.I)  # a tag a generator gives its heading's id
_ID_TAG_HEADS = {b"sec", b"div", b"art", *(b"h%d " % n for n in range(1, 7))}  # a quick look before the match
_ID = re.compile(rb"""\sid=(["'])([^"'<>]*)\1""")
_HEADING_REST = re.compile(rb"(.*?)</h([1-6])\s*>", re.S | re.I)  # a heading's inner HTML after its opening tag
# A section's own heading: past empty anchors (`<span id="..."></span>`), the first element.
_FIRST_HEADING = re.compile(
    rb"\s*(?:<(?:span|a)\b[^<>]*>\s*</(?:span|a)\s*>\s*)*<h([1-6])\b[^<>]*>(.*?)</h\1\s*>", re.S | re.I
)
_WORD = re.compile(r"[^\W_]+")
# A self-closing tag: its name, then its attributes (no `<` or `>` inside, as generators write them), then `/>`.
_SELF_CLOSED = re.compile(rb"<([A-Za-z][A-Za-z0-9:_-]*)((?:\s[^<>]*?)?)\s*/>")
_TAG_NAME = re.compile(rb"[A-Za-z][A-Za-z0-9:_-]*")
_HEADING_OPEN = re.compile(r"^\s*<h([1-6])>")  # a heading line of the minimal HTML that may not close on it
_HEADING_BODY = re.compile(rb"<h[1-6][\s>](.*?)</h[1-6]\s*>", re.S | re.I)
HEADING_LINES = 8
_VOID = {  # HTML's void elements (and the obsolete ones parsers still treat so): `<br/>` is `<br>`
    *(b"area base br col embed hr img input link meta param source track wbr".split()),
    *(b"basefont bgsound frame keygen command image isindex nextid spacer".split()),
}
# A list item that is a paragraph; its text may not run past another item's tag, so a page whose items are not
# closed (valid HTML) is scanned once, not once per item.
_PROSE_ITEM = re.compile(rb"<li\b[^<>]*>\s*<p\b(?:[^<]|<(?!/?li\b))*?</p\s*>\s*</li\s*>", re.I)
_LINK_TAG = re.compile(rb"</?a\b[^<>]*>", re.I)
_ASIDE_TAG = re.compile(rb"<(/?)aside\b([^<>]*)>", re.I)
_DOCUTILS_ASIDE = re.compile(rb"""\sclass=(["'])(?:footnote|citation|topic)\b""", re.I)  # -list too


@dataclass(frozen=True)
class Page:
    title: str | None
    sections: list[Section]


def charset_of(data: bytes, declared: str | None = None) -> str:
    """The page's charset: a byte order mark, else `declared` (a WARC record's HTTP header), else a
    `<meta charset>` in the first 4 KB, else UTF-8 when the bytes are UTF-8, else detected (resiliparse)."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return name
    for name in (declared, _meta_charset(data[:4096])):
        if name and _known(name):
            return _known(name)
    try:
        data.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        from resiliparse.parse.encoding import detect_encoding

        return _known(detect_encoding(data)) or "cp1252"


def _meta_charset(head: bytes) -> str | None:
    found = _META_CHARSET.search(head)
    return found.group(1).decode("ascii") if found else None


def _known(name: str) -> str | None:
    try:
        found = codecs.lookup(name.strip().lower()).name
    except LookupError:
        return None
    # What browsers do (WHATWG): a page that says latin-1 or ascii is read as windows-1252.
    return "cp1252" if found in ("latin-1", "iso8859-1", "ascii") else found


def html_page(data: bytes, declared: str | None = None) -> Page:
    """The page's title (the main content's first h1, else `<title>`) and its sections (`sections_from_blocks`),
    read in its own charset (`charset_of`; undecodable bytes are replaced)."""
    charset = charset_of(data, declared)
    return _page_of(_parsed(_html_7(_cleaned(data, charset)), charset))


def _cleaned(data: bytes, charset: str) -> bytes:
    """The page after html-6's byte fixes (`_closed_empty_elements`) and those before it (`_drop_heading_ids`,
    `_unwrap_links_in_prose_items`, `_docutils_asides_as_divs`)."""
    closed = _closed_empty_elements(data)
    return _docutils_asides_as_divs(_unwrap_links_in_prose_items(_drop_heading_ids(closed, charset)))


def _html_7(data: bytes) -> bytes:
    """html-7's fixes (tasks/ingest/main_content_rules.py): a title block kept (told by its h1's own words, so
    before the headings' links are unwrapped), prose lists kept, headings' links unwrapped."""
    return headings_without_links(lists_as_prose(title_blocks_kept(data)))


def _parsed(data: bytes, charset: str):
    from resiliparse.parse.html import HTMLTree

    return HTMLTree.parse_from_bytes(data, charset, errors="replace")


def _page_of(tree) -> Page:
    from resiliparse.extract.html2text import extract_plain_text

    if tree.body is None:
        return Page(_heading_text(tree.title or "") or None, [])
    minimal = extract_plain_text(
        tree,
        main_content=True,
        preserve_formatting="minimal_html",  # headings stay <h1>-<h6> lines: where sections start
        alt_texts=False,
        links=False,
        list_bullets=False,
        skip_elements=list(SKIPPED),
    )
    blocks: list[tuple[int, str]] = []
    for line in _joined_headings(minimal.splitlines()):
        heading = _HEADING.match(line)
        level = int(heading.group(1)) if heading else 0
        text = _clean(html.unescape(_TAG.sub(" ", heading.group(2) if heading else line)))
        if level:
            text = _heading_text(text)
        if text:
            blocks.append((level if level <= MAX_LEVEL else 0, text))
    first_h1 = next((text for level, text in blocks if level == 1), None)  # in the main content, not a banner
    title = first_h1 or _heading_text(tree.title or "") or None
    return Page(title, sections_from_blocks(blocks))


def reader_version(data: bytes) -> str | None:
    """The reader version a page's key names (tasks/ingest/folder.py: content_key): `HTML_7` where html-7 reads it
    otherwise than html-6 (`reads_anew_in_7`), else `HTML_6` where html-6 reads it otherwise than html-5
    (`reads_differently`), else None: the page reads as html-5 read it, and keeps its cached unit."""
    if reads_anew_in_7(data):
        return HTML_7
    return HTML_6 if reads_differently(data) else None


def reads_anew_in_7(data: bytes) -> bool:
    """Whether html-7's fixes (`_html_7`) change what the page reads as: read with and without them, where they
    change its bytes at all. Exact, so no page that reads the same is read again (a corpus that read correctly
    keeps its bytes and its champion)."""
    charset = charset_of(data)
    cleaned = _cleaned(data, charset)
    fixed = _html_7(cleaned)
    return fixed != cleaned and _page_of(_parsed(fixed, charset)) != _page_of(_parsed(cleaned, charset))


def _closed_empty_elements(data: bytes) -> bytes:
    """`data` with every self-closing element that HTML has no void form of (`<a id="x"/>`, `<div/>`) written as
    an empty element with its end tag (`<a id="x"></a>`). XHTML and XML syntax close them so; an HTML parser
    ignores the slash and leaves the element open to the end of its parent: DocBook's XSL stylesheets write each
    heading's anchor `<h2><a id="..."/>2.1. Title</h2>`, and the open `<a>` swallowed every heading after it
    (a chapter of dozens of sections read as one document). Void elements (`<br/>`, `<img/>`) mean the same
    either way and are left as they are; a page without such an element is returned untouched (a quick scan first:
    most pages close only void elements, and the substitution costs more than the scan)."""
    if not self_closes(data):
        return data
    return _SELF_CLOSED.sub(_closed, data)


def _joined_headings(lines: list[str]) -> list[str]:
    """`lines` with a heading spread over several lines (a `<br>` inside it, as rustdoc writes an impl's `where`
    clause) joined into one, so it stays a heading and not the text of the section before it. A heading that does
    not close within `HEADING_LINES` lines is left as it is."""
    out, i = [], 0
    while i < len(lines):
        opened = _HEADING_OPEN.match(lines[i])
        end = f"</h{opened.group(1)}>" if opened else ""
        if opened and end not in lines[i]:
            close = next((j for j in range(i + 1, min(len(lines), i + HEADING_LINES)) if end in lines[j]), None)
            if close is not None:
                out.append(" ".join(line.strip() for line in lines[i : close + 1]))
                i = close + 1
                continue
        out.append(lines[i])
        i += 1
    return out


def reads_differently(data: bytes) -> bool:
    """Whether html-6's reader reads the page otherwise than html-5's: it writes a non-void element self-closing
    (`_closed_empty_elements`) or breaks a heading with `<br>` (`_joined_headings`). Only such pages are read again
    after the upgrade (tasks/ingest/folder.py: content_key)."""
    return self_closes(data) or breaks_a_heading(data)


def breaks_a_heading(data: bytes) -> bool:
    """Whether a `<br>` stands inside an h1-h6 element of the page."""
    if b"<br" not in data and b"<BR" not in data:
        return False
    return any(b"<br" in inner.lower() for inner in _HEADING_BODY.findall(data))


def self_closes(data: bytes) -> bool:
    """Whether the page writes an element HTML has no void form of as self-closing (`_closed_empty_elements`
    changes it: the ingest reads such a page again after the upgrade that closes them, and no other page)."""
    end = data.find(b"/>")
    while end != -1:  # from each `/>` back to its tag's name: cheaper than a regular expression over every tag
        name = _TAG_NAME.match(data, data.rfind(b"<", 0, end) + 1)
        if name is not None and name.group(0).lower() not in _VOID:
            return True
        end = data.find(b"/>", end + 2)
    return False


def _closed(tag: re.Match) -> bytes:
    name = tag.group(1)
    if name.lower() in _VOID:
        return tag.group(0)
    return b"<" + name + (tag.group(2) or b"") + b"></" + name + b">"


def _drop_heading_ids(data: bytes, charset: str) -> bytes:
    """`data` without the ids that only spell their own section's heading (`<section id="manifest-related-options">`
    before "4.2. Manifest-related options", or `<h2 id="...">`, as documentation generators write them).
    resiliparse reads some words in ids as boilerplate markers ("related" among them) and dropped whole sections
    so named; such an id says nothing of the page's layout. Any other id stays evidence. Done on the bytes, from
    each ` id=`: cheaper than a regular expression over every tag or a walk of the tree (the results log:
    docs/results/, the HTML reader's heading-id pass)."""
    kept, last, found = [], 0, data.find(b" id=")
    while found != -1:
        start, end = data.rfind(b"<", 0, found), data.find(b">", found)
        named = start != -1 and end != -1 and data[start + 1 : start + 4].lower() in _ID_TAG_HEADS
        tag = _ID_TAG.fullmatch(data, start, end + 1) if named else None
        given = _heading_id(data, tag, charset) if tag is not None and start >= last else None
        if given is not None:
            kept += [data[last : start + 1], tag.group(1), tag.group(2)[: given.start()], tag.group(2)[given.end() :]]
            last = end
        found = data.find(b" id=", found + 4)
    return b"".join([*kept, data[last:]]) if kept else data


def _unwrap_links_in_prose_items(data: bytes) -> bytes:
    """`data` with the `<a>` tags inside list items written as paragraphs (`<li><p>...</p></li>`) removed, their
    text kept. resiliparse drops a list whose text is mostly links as navigation; a documentation page's list of
    cases or options, each a sentence naming functions by link, is prose (Sphinx writes every such item so; what
    the Python documentation's pages lost: docs/results/, the HTML reader's lists of sentences with links). Menus and
    link rows are `<li><a>` items without a paragraph: they stay links, and navigation."""
    if b"<li" not in data and b"<LI" not in data:
        return data
    return _PROSE_ITEM.sub(lambda item: _LINK_TAG.sub(b"", item.group(0)), data)


def _docutils_asides_as_divs(data: bytes) -> bytes:
    """`data` with docutils' footnotes, citations and topics (an abstract) written as `<div>`, not `<aside>`.
    resiliparse drops every `<aside>` as a sidebar; docutils (Sphinx, and every site made with it) writes these
    parts of the text so (a footnote-list of footnotes, on many of the Python documentation's pages:
    docs/results/, the HTML reader's footnotes and topics). Any other `<aside>` (a site's sidebar, docutils' own
    `sidebar`) stays one; an end tag follows its start tag's fate."""
    if b"<aside" not in data and b"<ASIDE" not in data:
        return data
    kept, last, opened = [], 0, []
    for tag in _ASIDE_TAG.finditer(data):
        if tag.group(1):
            converted = opened.pop() if opened else False
        else:
            converted = _DOCUTILS_ASIDE.search(tag.group(2)) is not None
            opened.append(converted)
        if converted:
            kept += [data[last : tag.start()], b"</div>" if tag.group(1) else b"<div" + tag.group(2) + b">"]
            last = tag.end()
    return b"".join([*kept, data[last:]]) if kept else data


def _heading_id(data: bytes, tag: re.Match, charset: str) -> re.Match | None:
    """The id attribute of `tag` (a section, or a heading) where it spells the words of the heading it starts
    with, else None."""
    name, given = tag.group(1).lower(), _ID.search(tag.group(2))
    if given is None:
        return None
    window = min(len(data), tag.end() + 2000)
    if name.startswith(b"h"):
        heading = _HEADING_REST.match(data, tag.end(), window)
        inner = heading.group(1) if heading and heading.group(2).lower() == name[1:] else None
    else:
        heading = _FIRST_HEADING.match(data, tag.end(), window)
        inner = heading.group(2) if heading else None
    if inner is None:
        return None
    text = html.unescape(_TAG.sub(" ", inner.decode(charset, errors="replace")))
    return given if _id_words(given.group(2).decode(charset, errors="replace")) in _heading_words(text) else None


def _id_words(text: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(text.lower()))


def _heading_words(text: str) -> tuple[tuple[str, ...], ...]:
    """A heading's words as an id can spell them: all of them, or without the leading numbers a slug drops."""
    words = _id_words(_heading_text(text))
    return words, tuple(words[next((i for i, w in enumerate(words) if not w.isdigit()), len(words)) :])


def _clean(line: str) -> str:
    return _BLANKS.sub(" ", line).strip()


def _heading_text(text: str) -> str:
    """A heading without the permalink sign that documentation generators put after it, nor the section number
    they put before it."""
    return _SECTION_NUMBER.sub("", _clean(text).rstrip("¶#").strip())
