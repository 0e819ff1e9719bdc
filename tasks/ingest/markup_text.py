"""Markdown and reStructuredText -> a page title and its prose, cut into sections at its h1-h3 headings.

    blocks = [(level, text), ...]                   # a heading (level 1-3) or a paragraph (level 0), in order
    sections = sections_from_blocks(blocks)         # one Section per heading, with the paragraphs up to the next

Front matter (YAML `---` or TOML `+++` at the top), code (fenced, indented, reST literal blocks and code
directives, doctest blocks), raw HTML, tables' borders and comments are not prose and are dropped; inline
markup is reduced to its text. Headings deeper than h3 stay in their section as a line. Markdown is parsed
by markdown-it-py (CommonMark with tables); reST by the line rules of `rst_blocks` (docutils would stop at
every Sphinx role it does not know).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_LEVEL = 3  # h1-h3 start a section


@dataclass(frozen=True)
class Section:
    heading: str | None  # None: the text before the page's first heading
    level: int  # 1-3, 0 for the text before the first heading
    text: str  # its paragraphs, one a line


def sections_from_blocks(blocks: list[tuple[int, str]]) -> list[Section]:
    """Sections from (level, text) blocks: each h1-h3 heading starts one, its text the paragraphs up to the
    next h1-h3 heading (a deeper heading, level > 3, is a line of it). A heading without text before the next
    one is no section (a page's title followed by its first subsection)."""
    sections: list[Section] = []
    heading, level, lines = None, 0, []

    def close() -> None:
        text = "\n".join(lines).strip()
        if text:
            sections.append(Section(heading, level, text))

    for block_level, text in blocks:
        if 1 <= block_level <= MAX_LEVEL:
            close()
            heading, level, lines = text, block_level, []
        else:
            lines.append(text)
    close()
    return sections


# --- Markdown -------------------------------------------------------------------------------------------------

_FRONT_MATTER = re.compile(
    r"\A\ufeff?(?:---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)|\+\+\+[ \t]*\n.*?\n\+\+\+[ \t]*(?:\n|\Z))", re.S
)
_TAGS = re.compile(r"<[^>\n]+>")


def strip_front_matter(text: str) -> str:
    return _FRONT_MATTER.sub("", text, count=1)


def markdown_blocks(text: str) -> list[tuple[int, str]]:
    """(level, text) of each heading and prose paragraph (list items and table cells included) of a
    Markdown page, front matter, code and raw HTML dropped."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable("table")
    tokens = md.parse(strip_front_matter(text))
    blocks: list[tuple[int, str]] = []
    level = 0
    for token in tokens:
        if token.type == "heading_open":
            level = int(token.tag[1])
        elif token.type == "heading_close":
            level = 0
        elif token.type == "inline":
            line = _inline_text(token.children or [])
            if line:
                blocks.append((level if level <= MAX_LEVEL else 0, line))
    return blocks


def _inline_text(children: list) -> str:
    parts = []
    for child in children:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return re.sub(r"\s+", " ", _TAGS.sub("", "".join(parts))).strip()


def markdown_page(text: str) -> tuple[str | None, list[Section]]:
    """The page's title (its first h1) and its sections."""
    blocks = markdown_blocks(text)
    title = next((t for level, t in blocks if level == 1), None)
    return title, sections_from_blocks(blocks)


# --- reStructuredText -----------------------------------------------------------------------------------------

ADORNMENT = set("=-~^\"*+#:.'`_<>")
# Directives whose body is code or machinery, never prose.
CODE_DIRECTIVES = {
    "code", "code-block", "sourcecode", "doctest", "testcode", "testoutput", "testsetup", "testcleanup",
    "literalinclude", "productionlist", "highlight", "toctree", "include", "raw", "image", "figure", "math",
    "index", "csv-table", "list-table", "only", "ifconfig", "tabularcolumns", "moduleauthor", "sectionauthor",
    "sectnum", "contents", "graphviz", "digraph", "autoclass", "automodule", "autofunction",
}  # fmt: skip
ADMONITIONS = {
    "note", "warning", "seealso", "important", "tip", "hint", "caution", "attention", "danger", "error",
    "admonition", "topic", "sidebar", "rubric", "impl-detail",
}  # fmt: skip
VERSION_DIRECTIVES = {"versionadded", "versionchanged", "deprecated", "deprecated-removed"}
_DIRECTIVE = re.compile(r"^\s*\.\.\s+([\w:.-]+)::(.*)$")
_ROLE = re.compile(r":[\w:+.-]+:`~?!?([^`<]*?)\s*(?:<[^>`]*>)?`")
_LINK = re.compile(r"`([^`<]*?)\s*(?:<[^>`]*>)?`_{1,2}")
_LITERAL = re.compile(r"``([^`]*)``")
_INTERPRETED = re.compile(r"`([^`]*)`")
_EMPHASIS = re.compile(r"(?<![\w*])\*\*?([^*\s](?:[^*]*[^*\s])?)\*\*?(?![\w*])")
_REFERENCE = re.compile(r"\s*\[(?:\d+|#[\w-]*|\*)\]_")
_SUBSTITUTION = re.compile(r"\|([^|\s][^|]*)\|_{0,2}")


def _adornment(line: str) -> bool:
    line = line.rstrip()
    return len(line) >= 3 and len(set(line)) == 1 and line[0] in ADORNMENT


def rst_inline(text: str) -> str:
    """reST inline markup -> its text: roles, links, literals, emphasis, footnote references."""
    text = _ROLE.sub(r"\1", text)
    text = _LITERAL.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _INTERPRETED.sub(r"\1", text)
    text = _REFERENCE.sub("", text)
    text = _SUBSTITUTION.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\1", text)
    text = re.sub(r"(?<=\S)::$", ":", text.rstrip())
    return re.sub(r"\s+", " ", text.replace("\\", "")).strip()


def rst_blocks(source: str) -> list[tuple[int, str]]:
    """(level, text) of each heading (levels in order of first use of each adornment style) and prose paragraph
    of a reST page. Dropped: comments, literal blocks (after `::`), code and machinery directives
    (`CODE_DIRECTIVES`), directive options, doctest blocks, table borders, field lists' markers."""
    return _RstReader(source.expandtabs(8).splitlines()).read()


class _RstReader:
    """`rst_blocks`' walk over a page's lines: each step reads from one line and says which line is next."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.styles: list[tuple[str, bool]] = []
        self.blocks: list[tuple[int, str]] = []
        self.paragraph: list[str] = []
        self.skip_indent: int | None = None  # inside a block dropped whole: lines indented more than this
        self.literal_after: int | None = None  # the paragraph just closed ended with `::`: its indent (code follows)
        self.paragraph_indent = 0

    def read(self) -> list[tuple[int, str]]:
        i = 0
        while i < len(self.lines):
            i = self.step(i)
        self.close()
        return self.blocks

    def close(self) -> None:
        """End the paragraph being read: a prose block unless it is only `::` or a doctest."""
        if self.paragraph:
            text = " ".join(self.paragraph)
            self.literal_after = self.paragraph_indent if text.rstrip().endswith("::") else None
            prose = rst_inline(text)
            if prose and prose != "::" and not text.lstrip().startswith(">>>"):
                self.blocks.append((0, prose))
            self.paragraph.clear()

    def step(self, i: int) -> int:
        line = self.lines[i]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if self.skip_indent is not None:
            if not stripped or indent > self.skip_indent:
                return i + 1
            self.skip_indent = None
        if not stripped:
            self.close()
            return i + 1
        if self.literal_after is not None and not self.paragraph:
            if indent > self.literal_after:  # the block after `para::`, indented more than it, is code
                self.skip_indent, self.literal_after = self.literal_after, None
                return i  # read again: skipped
            self.literal_after = None
        heading = self.heading(i, line, stripped, indent)
        if heading is not None:
            return heading
        directive = _DIRECTIVE.match(line)
        if directive or stripped.startswith(".."):
            return self.directive(i, directive, indent)
        if _adornment(line) or stripped.startswith(("+-", "+=", "|")) or re.match(r"^[=\s]+$", stripped):
            self.close()  # a transition or a table border
            return i + 1
        if not self.paragraph and re.match(r"^:[\w -]+:(\s|$)", stripped):
            stripped = re.sub(r"^:[\w -]+:\s*", "", stripped)  # a field list: its value is text
            if not stripped:
                return i + 1
        if not self.paragraph:
            self.paragraph_indent = indent
        self.paragraph.append(stripped)
        return i + 1

    def heading(self, i: int, line: str, stripped: str, indent: int) -> int | None:
        """A heading (underlined, or over- and underlined) at line `i`: recorded, the next line returned."""
        following = self.lines[i + 1] if i + 1 < len(self.lines) else ""
        after = self.lines[i + 2] if i + 2 < len(self.lines) else ""
        over = _adornment(line) and following.strip() and _adornment(after) and not self.paragraph
        under = (
            not self.paragraph
            and indent == 0
            and not _adornment(line)
            and _adornment(following)
            and len(following.rstrip()) >= len(stripped)
        )
        if not (over or under):
            return None
        self.close()
        style = ((line if over else following).strip()[0], bool(over))
        if style not in self.styles:
            self.styles.append(style)
        level = self.styles.index(style) + 1
        heading = rst_inline((following if over else line).strip())
        self.blocks.append((level if level <= MAX_LEVEL else 0, heading))
        return i + 3 if over else i + 2

    def directive(self, i: int, directive: re.Match | None, indent: int) -> int:
        """A directive or a comment at line `i`: a prose directive's text is read, anything else skipped."""
        self.close()
        name = directive.group(1).split(":")[-1] if directive else ""
        if not directive or name in CODE_DIRECTIVES:
            self.skip_indent = indent  # a comment, a target, a footnote or a code directive: its body too
            return i + 1
        # A prose directive: its body stays. An admonition's argument is prose too (a version directive's after
        # its version); another's (a signature, its continuation lines, options) goes.
        argument = directive.group(2).strip()
        if name in VERSION_DIRECTIVES:
            argument = argument.partition(" ")[2]
        i += 1
        header = []
        while i < len(self.lines) and self.lines[i].strip():
            header.append(self.lines[i].strip())
            i += 1
        if name in ADMONITIONS or name in VERSION_DIRECTIVES:
            header = [h for h in header if not re.match(r"^:[\w -]+:", h)]
            self.paragraph_indent = indent + 1
            self.paragraph.extend(part for part in (argument, *header) if part)
        return i


def rst_page(source: str) -> tuple[str | None, list[Section]]:
    """The page's title (its first heading) and its sections."""
    blocks = rst_blocks(source)
    title = next((t for level, t in blocks if level == 1), None)
    return title, sections_from_blocks(blocks)
