"""Evaluation sets: loaders for user-supplied files and the built-in held-out demo retrieval set.

Loaders take paths and never copy data. A missing file raises `DatasetMissing`, which the
evaluate task turns into a "not run" status rather than a score.
"""

from __future__ import annotations

import bz2
import csv
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class DatasetMissing(FileNotFoundError):
    """An evaluation's data file is absent: the evaluation is reported as not run."""


@dataclass(frozen=True)
class RetrievalSet:
    """Queries, a document collection and each query's relevant document rows."""

    name: str
    query_ids: list[str]
    queries: list[str]
    doc_ids: list[str]
    docs: list[str]
    relevant: list[set[int]]
    dropped_queries: int = 0


@dataclass(frozen=True)
class LabelledTexts:
    """Short texts with one label each (`labels` index `label_names`)."""

    name: str
    texts: list[str]
    labels: np.ndarray
    label_names: list[str]


@dataclass(frozen=True)
class SimilarityPairs:
    """Text pairs with a gold similarity score."""

    name: str
    a: list[str]
    b: list[str]
    gold: np.ndarray


def _require(path: str | Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise DatasetMissing(f"evaluation data not found: {path}")
    return path


def _json_lines(path: Path, required: tuple[str, ...]) -> Iterator[dict]:
    """The objects of a JSON Lines file; a line that is no JSON object, or lacks a `required` key, is an error
    naming the file and line."""
    with open(_require(path), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from None
            if not isinstance(obj, dict) or (missing := [key for key in required if key not in obj]):
                what = f"no {', '.join(map(repr, missing))}" if isinstance(obj, dict) else "not a JSON object"
                raise ValueError(f"{path}:{number}: {what} (a BEIR line needs {', '.join(map(repr, required))})")
            yield obj


def load_stackoverflow(path: str | Path, limit: int = 0) -> LabelledTexts:
    """The StackOverflow titles TSV (`id`, `title`, `tag`); tags become labels in sorted order.

    `limit` keeps the first rows in file order (tags are interleaved there), for tests.
    """
    path = _require(path)
    titles, tags = [], []
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            titles.append(row["title"])
            tags.append(row["tag"])
            if limit and len(titles) >= limit:
                break
    names = sorted(set(tags))
    index = {t: i for i, t in enumerate(names)}
    return LabelledTexts(path.name, titles, np.array([index[t] for t in tags], dtype=np.int64), names)


def load_stsb(path: str | Path, limit: int = 0) -> SimilarityPairs:
    """An STS-B CSV without a header: `sentence1,sentence2,score` (0-5), quoted where needed."""
    path = _require(path)
    a, b, gold = [], [], []
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.reader(f):
            if len(row) != 3:
                raise ValueError(f"{path}: expected 3 fields, got {len(row)}: {row!r}")
            a.append(row[0])
            b.append(row[1])
            gold.append(float(row[2]))
            if limit and len(a) >= limit:
                break
    return SimilarityPairs(path.name, a, b, np.array(gold))


def lee_dir() -> Path:
    """gensim's test data folder, which ships `lee.cor` and `similarities0-1.txt`."""
    import gensim

    return Path(gensim.__file__).parent / "test" / "test_data"


def load_lee(folder: str | Path | None = None) -> SimilarityPairs:
    """Lee et al. (2005): 50 news documents and a 50 x 50 matrix of mean human similarity (0-1).

    Every unordered pair i < j is one item (1,225 pairs), taken from the upper triangle. The
    documents are Latin-1 (pound signs), as gensim reads them.
    """
    folder = Path(folder) if folder else lee_dir()
    docs = [line.strip() for line in _require(folder / "lee.cor").read_text(encoding="latin-1").splitlines()]
    docs = [d for d in docs if d]
    matrix = np.loadtxt(_require(folder / "similarities0-1.txt"))
    if matrix.shape != (len(docs), len(docs)):
        raise ValueError(f"Lee matrix {matrix.shape} does not match {len(docs)} documents")
    i, j = np.triu_indices(len(docs), k=1)
    return SimilarityPairs("lee-50", [docs[x] for x in i], [docs[x] for x in j], matrix[i, j])


def load_beir(folder: str | Path, split: str = "test") -> RetrievalSet:
    """A BEIR-layout folder: `corpus.jsonl` (`_id`, `title`, `text`), `queries.jsonl` (`_id`, `text`)
    and `qrels/<split>.tsv` (`query-id`, `corpus-id`, `score`, with a header). A document's text is
    its title and text joined by a space; a score > 0 is relevant; queries without a relevant
    document in the corpus are dropped and counted."""
    folder = _require(folder)
    doc_ids, docs = [], []
    for obj in _json_lines(folder / "corpus.jsonl", ("_id",)):
        doc_ids.append(str(obj["_id"]))
        docs.append(f"{obj.get('title') or ''} {obj.get('text') or ''}".strip())
    queries = {str(obj["_id"]): obj["text"] for obj in _json_lines(folder / "queries.jsonl", ("_id", "text"))}
    row_of = {d: i for i, d in enumerate(doc_ids)}
    qrels: dict[str, set[int]] = {}
    with open(_require(folder / "qrels" / f"{split}.tsv"), encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t")
        next(reader, None)
        for row in reader:
            if len(row) >= 3 and float(row[2]) > 0 and row[1] in row_of:
                qrels.setdefault(row[0], set()).add(row_of[row[1]])
    kept = [q for q in queries if qrels.get(q)]
    return RetrievalSet(
        name=folder.name,
        query_ids=kept,
        queries=[queries[q] for q in kept],
        doc_ids=doc_ids,
        docs=docs,
        relevant=[qrels[q] for q in kept],
        dropped_queries=len(queries) - len(kept),
    )


def write_beir(dataset: RetrievalSet, folder: str | Path, split: str = "test") -> Path:
    """Write a retrieval set in the BEIR layout (to inspect the demo set, or to test the loader)."""
    folder = Path(folder)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as f:
        for doc_id, text in zip(dataset.doc_ids, dataset.docs, strict=True):
            f.write(json.dumps({"_id": doc_id, "title": "", "text": text}, ensure_ascii=False) + "\n")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as f:
        for query_id, text in zip(dataset.query_ids, dataset.queries, strict=True):
            f.write(json.dumps({"_id": query_id, "text": text}, ensure_ascii=False) + "\n")
    with open(folder / "qrels" / f"{split}.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for query_id, rel in zip(dataset.query_ids, dataset.relevant, strict=True):
            for row in sorted(rel):
                f.write(f"{query_id}\t{dataset.doc_ids[row]}\t1\n")
    return folder


@dataclass(frozen=True)
class DemoRetrievalConfig:
    """The held-out retrieval set built from the demo Wikipedia sample.

    Held-out articles: blake2b(title) mod 100 < `held_out_percent` (stable when articles are
    added or reordered). The collection is every paragraph of `min_words`+ words of every
    article, so the other articles act as distractors. `max_articles` keeps the first
    articles in dump order (0: all), for tests.
    """

    held_out_percent: int = 20
    min_words: int = 20
    max_articles: int = 0


def is_held_out(title: str, held_out_percent: int = DemoRetrievalConfig.held_out_percent) -> bool:
    """Whether an article belongs to the held-out evaluation split (training should skip it)."""
    digest = hashlib.blake2b(title.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % 100 < held_out_percent


_HEADING = re.compile(r"^(={2,6})\s*(.+?)\s*\1\s*$", re.MULTILINE)
_SKIP_HEADINGS = {
    "see also",
    "references",
    "external links",
    "further reading",
    "notes",
    "bibliography",
    "sources",
    "citations",
    "footnotes",
}


def _sections(markup: str) -> list[tuple[int, str | None, str]]:
    """(level, heading, body markup); the lead section has level 1 and no heading."""
    out: list[tuple[int, str | None, str]] = []
    last, level, heading = 0, 1, None
    for m in _HEADING.finditer(markup):
        out.append((level, heading, markup[last : m.start()]))
        level, heading, last = len(m.group(1)), m.group(2), m.end()
    out.append((level, heading, markup[last:]))
    return out


def _paragraphs(markup: str, min_words: int) -> list[str]:
    from tasks.ingest.readers import clean_wikitext

    lines = (line.strip().lstrip("*#:;").strip() for line in clean_wikitext(markup).splitlines())
    return [line for line in lines if len(line.split()) >= min_words]


class SectionRetrieval:
    """A retrieval set built page by page: every paragraph of every page is a document; a held-out page queries
    with its title (relevant: all its paragraphs) and with `"<title>: <heading>"` per section (relevant: the
    section's paragraphs and its subsections'), reference-list sections and queries without a paragraph
    skipped. `build_demo_retrieval` feeds it a dump's articles; the GPU suite (benchmarks/gpu_suite/) the
    Python documentation's HTML pages."""

    def __init__(self) -> None:
        self.doc_ids: list[str] = []
        self.docs: list[str] = []
        self.query_ids: list[str] = []
        self.queries: list[str] = []
        self.relevant: list[set[int]] = []

    def add(self, page: str, title: str, sections: list[tuple[int, str | None, list[str]]], held_out: bool) -> None:
        """`sections`: (level, heading, paragraphs) in page order; the lead (the text before the first heading)
        has heading None. Document ids are `<page>#p<n>`, query ids `<page>` and `<page>#s<section>`."""
        section_rows: list[tuple[int, str | None, list[int]]] = []
        first_row = len(self.docs)
        for level, heading, paragraphs in sections:
            rows = []
            for paragraph in paragraphs:
                rows.append(len(self.docs))
                self.doc_ids.append(f"{page}#p{len(self.docs) - first_row}")
                self.docs.append(paragraph)
            section_rows.append((level, heading, rows))
        if not held_out:
            return
        page_rows = {r for *_, rows in section_rows for r in rows}
        if page_rows:
            self._query(page, title, page_rows)
        for s, (level, heading, rows) in enumerate(section_rows):
            if not heading or heading.lower() in _SKIP_HEADINGS:
                continue
            owned = set(rows)
            for sub_level, _, sub_rows in section_rows[s + 1 :]:
                if sub_level <= level:
                    break
                owned.update(sub_rows)
            if owned:
                self._query(f"{page}#s{s}", f"{title}: {heading}", owned)

    def _query(self, query_id: str, text: str, relevant: set[int]) -> None:
        self.query_ids.append(query_id)
        self.queries.append(text)
        self.relevant.append(relevant)

    def result(self, name: str) -> RetrievalSet:
        return RetrievalSet(name, self.query_ids, self.queries, self.doc_ids, self.docs, self.relevant)


def build_demo_retrieval(
    config: DemoRetrievalConfig = DemoRetrievalConfig(), path: Path | None = None
) -> RetrievalSet:
    """Queries from held-out articles of the demo dump (`SectionRetrieval`'s rules). Headings come from the raw
    markup, because `clean_wikitext` strips them."""
    from gensim.corpora.wikicorpus import extract_pages

    from tasks.ingest.readers import clean_wikitext, default_corpus

    path = _require(path or default_corpus())
    built = SectionRetrieval()
    articles = 0
    with bz2.open(path) if path.name.endswith(".bz2") else open(path, "rb") as stream:
        for title, markup, _ in extract_pages(stream, filter_namespaces=("0",)):
            if markup.lstrip()[:9].lower() == "#redirect":
                continue
            articles += 1
            if config.max_articles and articles > config.max_articles:
                break
            sections = [
                (
                    level,
                    None if heading is None else clean_wikitext(heading).strip(),
                    _paragraphs(body, config.min_words),
                )
                for level, heading, body in _sections(markup)
            ]
            built.add(title, title, sections, is_held_out(title, config.held_out_percent))
    return built.result("demo-wiki-heldout")
