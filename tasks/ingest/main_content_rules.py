"""Lists that are prose and headings that are links, read as the text they are: resiliparse's main-content rules take
a `<ul>` for a menu when it stands near the top of the page or when its items carry links, and a heading for a
banner when its words are links.

    fixed = lists_as_prose(data)            # the page's prose `<ul>`s written as `<ol>` (the same text, no bullets)
    fixed = headings_without_links(fixed)   # the links inside h1-h6 headings unwrapped, their text kept
    fixed = title_blocks_kept(fixed)        # an id "header" off the element that holds the page's h1 and prose

resiliparse (`extract_plain_text(main_content=True)`) drops a `<ul>` with fewer than three ancestors below `<body>`
as the site's navigation, and one whose text is a fifth or so link text. Pandoc's standalone pages and hand-written
ones put their lists straight in `<body>`; javadoc lists a class's fields and methods as `<ul>` items, each a
section with its heading, signature and see-also links. Both lost whole sections (docs/results/, the generator
ladder). A list whose words are mostly outside links is prose, whatever its depth: it is written as an `<ol>`, which
those two rules do not touch, with its attributes, so every rule on classes and ids still applies. A menu (items
that are links) and a list that names itself navigation by class or id stay `<ul>`s. And it drops any element
whose id says header (`header`, `head`, `site-header`) as the site's banner: AsciiDoc writes a manual page's title
and its NAME section in `<div id="header">`.

Done on the bytes, as the reader's other fixes are (tasks/ingest/html_text.py): a walk of resiliparse's tree from
Python costs more than reading the page (a javadoc page of 55,000 nodes: 0.45 s against 0.06).
"""

from __future__ import annotations

import re

PROSE_WORDS = 4  # fewer words outside links than this is a row of links, not prose
_LIST_TAG = re.compile(rb"<(/?)ul(?=[\s>/])([^<>]*)>", re.I)
_LINK = re.compile(rb"<a\b[^<>]*>.*?</a\s*>", re.I | re.S)
_TAG = re.compile(rb"<[^<>]*>")
_ENTITY = re.compile(rb"&#?\w+;")
_WORD = re.compile(r"[^\W_]+")  # letters and digits: not a permalink sign, nor an icon font's private-use character
_CLASS_OR_ID = re.compile(rb"""\s(?:class|id)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.I)
# resiliparse's own test for a list that names itself navigation (a `ul` so named is dropped whatever its text)
_NAMED_NAVIGATION = re.compile(rb"(?:^|[\s_-])(?:nav(?:bar|igation)?|menu(?:[_-]item)?)(?:$|\s)")
_HEADING = re.compile(rb"(<h([1-6])\b[^<>]*>)(.*?)(</h\2\s*>)", re.I | re.S)
_LINK_TAG = re.compile(rb"</?a\b[^<>]*>", re.I)
# A no-break space that ends a heading's text, before its closing tags (rustdoc: `Iterator</a>,&nbsp;</span></h3>`).
_TRAILING_NBSP = re.compile(rb"(?:&nbsp;|&#160;|&#[xX]0*[aA]0;|\xc2\xa0)+((?:\s|</[A-Za-z][^<>]*>)*)$")


def lists_as_prose(data: bytes) -> bytes:
    """`data` with each `<ul>` that is prose (`_Counts.prose`: mostly words outside links, at least `PROSE_WORDS` of
    them, or items that are sections) and whose class or id does not name navigation, written as an `<ol>` (start
    and end tag). A `<ul>` without its end tag is left as it is. The text between two list tags is counted once,
    for every list open around it (a nested table of contents is not scanned once per level)."""
    if b"<ul" not in data and b"<UL" not in data:
        return data
    opened: list[tuple[re.Match, _Counts]] = []
    renamed: list[tuple[int, int]] = []  # the offsets of the `ul` in each tag rewritten
    last = 0
    for tag in _LIST_TAG.finditer(data):
        if opened:
            counted = _Counts.of(data[last : tag.start()])
            for _, counts in opened:
                counts.add(counted)
        last = tag.end()
        if not tag.group(1):
            opened.append((tag, _Counts()))
            continue
        if not opened:
            continue
        start, counts = opened.pop()
        if counts.prose() and not _names_navigation(start.group(2)):
            renamed += [(start.start() + 1, start.start() + 3), (tag.start() + 2, tag.start() + 4)]
    if not renamed:
        return data
    parts, last = [], 0
    for begin, end in sorted(renamed):
        parts += [data[last:begin], b"ol" if data[begin:end] == b"ul" else b"OL"]
        last = end
    return b"".join([*parts, data[last:]])


class _Counts:
    """A list's words, its words outside links, and whether it holds a heading with words of its own."""

    __slots__ = ("words", "outside", "sections")

    def __init__(self, words: int = 0, outside: int = 0, sections: bool = False) -> None:
        self.words, self.outside, self.sections = words, outside, sections

    @classmethod
    def of(cls, html: bytes) -> _Counts:
        if b"<" not in html:
            words = _words(html)
            return cls(words, words)
        heading = _HEADING.search(html)
        return cls(_words(html), _outside_links(html), heading is not None and _outside_links(heading.group(3)) > 0)

    def add(self, other: _Counts) -> None:
        self.words += other.words
        self.outside += other.outside
        self.sections = self.sections or other.sections

    def prose(self) -> bool:
        """Mostly words outside links, or items that are sections (a heading with words of its own: javadoc's
        member details, whose signatures are mostly links)."""
        return self.sections or self.outside >= max(PROSE_WORDS, self.words - self.outside)


def _words(html: bytes) -> int:
    """The words of `html`'s text (as UTF-8; any other charset's letters count as some word or none, alike on both
    sides of `_Counts.prose`'s comparison)."""
    return len(_WORD.findall(_ENTITY.sub(b" ", _TAG.sub(b" ", html)).decode("utf-8", "replace")))


def _names_navigation(attributes: bytes) -> bool:
    named = b" ".join(b"".join(found.groups(b"")) for found in _CLASS_OR_ID.finditer(attributes))
    return _NAMED_NAVIGATION.search(named) is not None


def headings_without_links(data: bytes) -> bytes:
    """`data` with the `<a>` tags inside its h1-h6 headings removed (their text kept) where the heading's links hold
    words, and without the no-break spaces that end a heading's text.

    resiliparse drops an element whose class speaks of a heading or header when most of its text is link text, as
    a site's banner: rustdoc's `div.main-heading` (an item's path, each part a link) and `h3.code-header` (an impl,
    each type a link) lost the page's title and its impls' headings. A heading's words are its section's name,
    wherever they link to; a permalink sign (`¶`, a link without words) is left alone. And resiliparse loses the
    text after a heading's last inline element when that text ends in a no-break space (rustdoc's `where` clauses
    end `Iterator,&nbsp;`); the reader strips a heading's blanks anyway."""
    if b"<h" not in data and b"<H" not in data:
        return data
    return _HEADING.sub(_heading_fixed, data)


def _heading_fixed(heading: re.Match) -> bytes:
    inner, unwrapped = heading.group(3), 0
    if (b"<a" in inner or b"<A" in inner) and any(_words(link.group(0)) for link in _LINK.finditer(inner)):
        inner, unwrapped = _LINK_TAG.subn(b"", inner)
    inner, stripped = _TRAILING_NBSP.subn(rb"\1", inner)
    if not (unwrapped or stripped):
        return heading.group(0)
    return heading.group(1) + inner + heading.group(4)


# The ids resiliparse drops an element for, as a banner (whatever the element holds).
_HEADER_ID = re.compile(rb"""\sid\s*=\s*(["']?)((?:[A-Za-z]+-)?head(?:er)?)\1(?=[\s/>])""", re.I)
_BLOCK_TAG = re.compile(rb"<(/?)(div|section|header)(?=[\s>/])[^<>]*>", re.I)
_H1 = re.compile(rb"<h1\b[^<>]*>(.*?)</h1\s*>", re.I | re.S)
_PARAGRAPH = re.compile(rb"<p\b[^<>]*>(.*?)</p\s*>", re.I | re.S)


def title_blocks_kept(data: bytes) -> bytes:
    """`data` without the header id (`_HEADER_ID`) of a `div`, `section` or `header` element that holds the page's
    title and its prose: an h1 with words outside links, and a paragraph of at least `PROSE_WORDS` such words. A
    site's banner (its name, a link home, a menu) keeps its id, and resiliparse drops it as before."""
    kept, last = [], 0
    for found in _HEADER_ID.finditer(data):
        start = data.rfind(b"<", 0, found.start())
        opening = _BLOCK_TAG.match(data, start)
        if start < last or opening is None or opening.end() < found.end() or opening.group(1):
            continue
        inner = data[opening.end() : _element_end(data, opening)]
        h1, paragraph = _H1.search(inner), _PARAGRAPH.search(inner)
        if h1 and paragraph and _outside_links(h1.group(1)) and _outside_links(paragraph.group(1)) >= PROSE_WORDS:
            kept += [data[last : found.start()]]
            last = found.end()
    return b"".join([*kept, data[last:]]) if kept else data


def _element_end(data: bytes, opening: re.Match) -> int:
    """Where the element that `opening` starts ends (its end tag, by counting its name's tags); the end of the
    page when it is not closed."""
    name, depth = opening.group(2).lower(), 1
    for tag in _BLOCK_TAG.finditer(data, opening.end()):
        if tag.group(2).lower() == name:
            depth += -1 if tag.group(1) else 1
            if depth == 0:
                return tag.start()
    return len(data)


def _outside_links(html: bytes) -> int:
    return _words(_LINK.sub(b" ", html))
