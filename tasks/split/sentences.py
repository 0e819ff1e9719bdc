"""Sentence splitting for Chinese, English and mixed text, and the `norm` matching form.

Rules, in order:
- a line break is always a boundary (sources put paragraphs and list items on lines);
- full-width terminators 。！？；… end a sentence, together with any closing quotes or
  brackets that follow (`他说：“好。”然后` splits after `”`);
- ASCII `.`, `!`, `?` end a sentence only when followed by whitespace, the end of the line
  or a CJK character; a `.` does not end one after a known abbreviation or an initial
  (`Dr.`, `e.g.`, `U.S.`, `J.`) or when the next word starts in lower case. Decimals
  (`1.5`) never match because a digit follows the dot.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

SPLIT_CODE_VERSION = "split_v2"  # v2: over-long sentences are cut at whitespace, not cropped
PIECE_DOCUMENTS = 200  # documents split between two progress reports (a piece; the output does not depend on it)

_CLOSERS = "”’」』）》】〕〉\"')\\]"
_CJK_CLASS = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_CJK = re.compile(rf"[{_CJK_CLASS}]")
# Candidates only: ASCII marks must already be followed by whitespace, end of line or CJK.
_BOUNDARY = re.compile(rf"[。！？；…]+[{_CLOSERS}]*|[!?.]+[{_CLOSERS}]*(?=\s|$|[{_CJK_CLASS}])")
_ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st mt vs etc e.g i.e cf al no nos fig figs vol vols pp p ed eds
    inc ltd co corp dept est approx ca jan feb mar apr jun jul aug sep sept oct nov dec
    u.s u.k u.n a.m p.m ph.d b.c a.d op gen col lt sgt capt gov sen rep rev""".split()
)

SENTENCES_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("sent_id", pa.int32()),
        ("is_title", pa.bool_()),
        ("text", pa.string()),
        ("norm", pa.string()),
    ]
)


@dataclass(frozen=True)
class SplitConfig:
    max_sentence_chars: int = field(
        default=512, metadata={"help": "cut longer sentences into pieces at whitespace (counted); titles are cropped"}
    )


def normalize(text: str) -> str:
    """The matching form: NFKC, case-folded, runs of whitespace collapsed to one space."""
    # NFKC is the identity and casefold is lower() on ASCII: a faster path to the same form (the results log:
    # docs/results/, the matching form's ASCII fast path)
    if text.isascii():
        return " ".join(text.lower().split())
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _ends_sentence(line: str, match: re.Match) -> bool:
    end = match.end()
    mark = match.group()[0]
    if mark != ".":
        return True  # full-width marks, and ! ? before a space (the regex checked what follows)
    if match.group().startswith(".."):
        return _next_word_starts_upper(line, end)  # an ellipsis ends a sentence only before a capital
    window = line[max(0, match.start() - 24) : match.start()].split()  # abbreviations are short
    if window and not line[match.start() - 1].isspace():
        token = window[-1].lstrip("([\"'“‘").lower()
        if token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha()):
            return False
        if len(token) >= 3 and all(ch.isalpha() for ch in token[::2]) and set(token[1::2]) == {"."}:
            return False  # dotted initialisms: u.s, e.u.r
    return not _next_word_starts_lower(line, end)


def _next_char(line: str, pos: int) -> str:
    while pos < len(line) and line[pos].isspace():
        pos += 1
    return line[pos] if pos < len(line) else ""


def _next_word_starts_lower(line: str, pos: int) -> bool:
    return _next_char(line, pos).islower()


def _next_word_starts_upper(line: str, pos: int) -> bool:
    nxt = _next_char(line, pos)
    return not nxt or nxt.isupper() or bool(_CJK.match(nxt))


def split_sentences(text: str) -> list[str]:
    """Split one document's text into sentences (original surface form, stripped)."""
    out: list[str] = []
    for line in text.splitlines():
        start = 0
        for match in _BOUNDARY.finditer(line):
            if _ends_sentence(line, match):
                piece = line[start : match.end()].strip()
                if piece:
                    out.append(piece)
                start = match.end()
        piece = line[start:].strip()
        if piece:
            out.append(piece)
    return out


def cut_at_whitespace(sentence: str, limit: int) -> list[str]:
    """Pieces of at most `limit` characters, cut after the last whitespace that fits (or at the
    limit when a piece has none); the pieces joined give the sentence back."""
    pieces = []
    while len(sentence) > limit:
        window = sentence[:limit]
        at = max(window.rfind(" "), window.rfind("\n"), window.rfind("\t"))
        at = at + 1 if at > 0 else limit
        pieces.append(sentence[:at])
        sentence = sentence[at:]
    return [*pieces, sentence] if sentence else pieces


def split_documents(
    doc_ids: list[str], titles: list[str | None], texts: list[str], config: SplitConfig
) -> tuple[pa.Table, dict[str, int]]:
    """Documents -> the sentences table (title first as `sent_id` 0), plus counts."""
    out_doc, out_sid, out_title, out_text = [], [], [], []
    cropped = cut = 0
    no_sentences = 0
    limit = config.max_sentence_chars
    for doc_id, title, text in zip(doc_ids, titles, texts, strict=True):
        sentences = split_sentences(text)
        if not sentences:
            no_sentences += 1
        title = title.strip() if title else ""
        first = 0 if title else 1
        if title:
            sentences.insert(0, title)
        if any(len(s) > limit for s in sentences):
            # A run without terminators (a table, a list, a whole page on one line) is cut into
            # pieces at whitespace: every character is kept. Only a title is cropped.
            cut += sum(len(s) > limit for s in sentences[first == 0 :])
            cropped += first == 0 and len(sentences[0]) > limit
            head = [sentences[0][:limit]] if first == 0 else []
            sentences = head + [piece for s in sentences[len(head) :] for piece in cut_at_whitespace(s, limit)]
        # Whole-document extends instead of per-row appends (this loop runs once per document).
        n = len(sentences)
        out_doc.extend([doc_id] * n)
        out_sid.extend(range(first, first + n))
        out_title.extend([bool(title)] + [False] * (n - 1) if n else [])
        out_text.extend(sentences)
    out_norm = list(map(normalize, out_text))
    table = pa.Table.from_arrays(
        [
            pa.array(out_doc, pa.string()),
            pa.array(out_sid, pa.int32()),
            pa.array(out_title, pa.bool_()),
            pa.array(out_text, pa.string()),
            pa.array(out_norm, pa.string()),
        ],
        schema=SENTENCES_SCHEMA,
    )
    counts = {"cropped_titles": int(cropped), "cut_sentences": cut, "documents_without_sentences": no_sentences}
    return table, counts


def split_shard(
    in_path: str, out_dir: str, index: int, config: SplitConfig, report: Callable[[int], None] | None = None
) -> dict[str, int]:
    """Read one documents shard, write sentences shard `index` (atomic + marker); a worker body.

    Documents are split `PIECE_DOCUMENTS` at a time, with `report(documents)` after each piece.
    """
    from storage.shards import read_shard, write_shard, write_shard_stats

    docs = read_shard(in_path, ["doc_id", "title", "text"])
    tables, counts = [], {}
    for start in range(0, max(docs.num_rows, 1), PIECE_DOCUMENTS):
        piece = docs.slice(start, PIECE_DOCUMENTS)
        table, piece_counts = split_documents(
            piece.column("doc_id").to_pylist(),
            piece.column("title").to_pylist(),
            piece.column("text").to_pylist(),
            config,
        )
        tables.append(table)
        counts = {k: counts.get(k, 0) + v for k, v in piece_counts.items()}
        if report:
            report(piece.num_rows)
    table = tables[0] if len(tables) == 1 else pa.concat_tables(tables).combine_chunks()
    stats = {"documents": docs.num_rows, "sentences": table.num_rows, **counts}
    write_shard_stats(Path(out_dir), index, stats)
    write_shard(Path(out_dir), index, table)
    return stats


def split_all(
    in_shards: list[Path],
    out_dir: Path,
    config: SplitConfig,
    workers: int | None = None,
    on_shard: Callable[[dict[str, int]], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> None:
    """Split every documents shard whose sentences shard is not done yet, on all cores
    (`on_progress(documents)` as pieces finish)."""
    from tasks.runtime.map_shards import map_shards

    map_shards(split_shard, in_shards, out_dir, config, workers, on_shard, on_progress)
