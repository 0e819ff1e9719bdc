"""The manual pages as a corpus: each section of a page (`.SH` / `.SS` of its roff source) one JSONL record
(`id`, `title`, `text`, `page`), for the corpus ladder's `man-pages` rung (a seeded 3,000 sections) and the
large rung (every page). Shared by corpus_ladder.py and large_corpus.py."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path

import harness  # noqa: F401 - the repository and benchmarks/ on the path, for what it imports

MAN = Path("/usr/share/man")
# The Google Cloud SDK on this machine ships 16,631 generated `gcloud_*` pages that share most of their sections
# word for word ("Gcloud wide flags"): one tool's reference, not a manual. They are left out.
MAN_SKIP = ("gcloud",)


# --- the manual pages: roff sections -> (heading, prose) ---------------------------------------------------

_ESCAPES = [
    (r"\\f(\[[^\]]*\]|\(..|.)", ""),  # font changes
    (r"\\\*(\[[^\]]*\]|\(..|.)", ""),  # strings
    (r"\\\((em|en)", "-"),
    (r"\\\((lq|rq|dq)", '"'),
    (r"\\\((aq|cq|oq)", "'"),
    (r"\\\(..", ""),
    (r"\\[-]", "-"),
    (r"\\[e\\]", "\\\\"),
    (r"\\[&,/|^:%0 ]", ""),
    (r"\\s[-+]?\d", ""),
]
_ALTERNATING = {".BR", ".RB", ".BI", ".IB", ".IR", ".RI"}


def _plain(text: str) -> str:
    for pattern, repl in _ESCAPES:
        text = re.sub(pattern, repl, text)
    return text.replace("\\", "")


def _args(line: str) -> list[str]:
    return [a.strip('"') for a in re.findall(r'"[^"]*"|\S+', line)]


def roff_sections(source: str) -> list[tuple[str, str]]:
    """(heading, prose) of each `.SH` / `.SS` section of a man page: text lines and font macros joined into
    paragraphs, other requests (.PP, .TP, .IP, .nf, ...) ending a paragraph, comments dropped."""
    sections: list[tuple[str, list[str]]] = []
    heading, paragraphs, current = "", [], []

    def end_paragraph() -> None:
        if current:
            paragraphs.append(" ".join(current))
            current.clear()

    for line in source.splitlines():
        if line.startswith(('.\\"', "'")):  # a comment, or a request with the no-break control character
            continue
        if line.startswith("."):
            name, *rest = line.split(None, 1) or [""]
            rest_text = rest[0] if rest else ""
            if name in (".SH", ".SS"):
                end_paragraph()
                sections.append((heading, paragraphs))
                heading, paragraphs = _plain(" ".join(_args(rest_text))).strip(), []
            elif name in (".B", ".I", ".SM", ".SB"):
                current.append(_plain(" ".join(_args(rest_text))))
            elif name in _ALTERNATING:
                current.append(_plain("".join(_args(rest_text))))
            else:
                end_paragraph()
            continue
        if line.strip():
            current.append(_plain(line.strip()))
    end_paragraph()
    sections.append((heading, paragraphs))
    return [(h, re.sub(r"\s+", " ", " ".join(p)).strip()) for h, p in sections if h]


def man_corpus(folder: Path, out: Path, target: int = 3000, min_words: int = 20) -> dict[str, int]:
    """One JSONL file per first letter (`id`, `title`, `text`, `page`), pages in a seeded (hashed) order until
    `target` sections of `min_words` words and two sentences or more; the title is the page's name, its
    one-line summary and the section's heading. A page that is only a `.so` link is skipped."""
    from tasks.split.sentences import split_sentences

    out.mkdir(parents=True, exist_ok=True)
    found = [p for p in folder.glob("man[1-8]/*.gz") if not p.name.startswith(MAN_SKIP)]
    pages = sorted(found, key=lambda p: hashlib.blake2b(p.name.encode(), digest_size=8).digest())
    groups: dict[str, list[dict]] = {}
    total = 0
    for path in pages:
        try:
            source = gzip.decompress(path.read_bytes()).decode("utf-8", errors="replace")
        except (OSError, EOFError):
            continue
        if source.lstrip().startswith(".so "):
            continue
        page = path.name.removesuffix(".gz")
        sections = roff_sections(source)
        names = [text for heading, text in sections if heading.upper() == "NAME"]
        summary = names[0].split(" - ", 1)[-1].strip() if names else ""
        for n, (heading, prose) in enumerate(sections):
            if heading.upper() in ("NAME", "SYNOPSIS") or len(prose.split()) < min_words:
                continue
            if len(split_sentences(prose)) < 2:
                continue
            name = page.rsplit(".", 1)[0]
            title = f"{name}: {summary} - {heading.capitalize()}" if summary else f"{name} - {heading.capitalize()}"
            row = {"id": f"{page}#{n}", "title": title, "text": prose, "page": page}
            groups.setdefault(page[0].lower() if page[0].isalpha() else "other", []).append(row)
            total += 1
        if total >= target:
            break
    for name, rows in groups.items():
        (out / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return {"sections": total, "files": len(groups), "pages": len({r["page"] for g in groups.values() for r in g})}
