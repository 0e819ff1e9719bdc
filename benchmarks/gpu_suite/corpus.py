"""GUR's corpus for the `gur-scratch` part and its held-out retrieval set: the Python documentation's Sphinx HTML
pages as JSON Lines, the set by `build_demo_retrieval`'s rules, the pairs by build-pairs' four stages."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from gpu_suite.harness import Ctx, stage_fn
from gpu_suite.settings import HELD_OUT_PERCENT


class SphinxPage(HTMLParser):
    """Headings and paragraphs of a Sphinx HTML page's main body (`div role="main"`): [level, heading, paragraphs]
    per section, in page order; the permalink marks, scripts and styles left out."""

    BLOCKS = ("h1", "h2", "h3", "h4", "h5", "h6", "p")

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[tuple[int, str, list[str]]] = []
        self.depth = 0  # div nesting inside the main body; 0: outside it
        self.skip = 0
        self.kind: str | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if not self.depth:
            self.depth = int(tag == "div" and values.get("role") == "main")
        elif tag == "div":
            self.depth += 1
        elif tag in ("script", "style") or (tag == "a" and "headerlink" in (values.get("class") or "")):
            self.skip += 1
        elif tag in self.BLOCKS and self.kind is None:
            self.kind, self.text = tag, []

    def handle_endtag(self, tag: str) -> None:
        if not self.depth:
            return
        if tag == "div":
            self.depth -= 1
        elif tag in ("script", "style", "a") and self.skip:
            self.skip -= 1
        elif tag == self.kind:
            text = " ".join("".join(self.text).split())
            if tag == "p" and text and self.sections:
                self.sections[-1][2].append(text)
            elif tag != "p" and text:
                self.sections.append((int(tag[1]), text, []))
            self.kind = None

    def handle_data(self, data: str) -> None:
        if self.kind and not self.skip:
            self.text.append(data)


def read_page(path: Path) -> list[tuple[int, str, list[str]]]:
    page = SphinxPage()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    page.close()
    return page.sections


def python_doc_pages(folder: Path, limit: int, workers: int) -> list[tuple[str, list]]:
    """(path, sections) of every page with a title (an h1 first), the first page of each title; the indexes,
    the search page and the changelog (a 3 MB list of bug numbers) left out."""
    from concurrent.futures import ProcessPoolExecutor

    skip = ("genindex", "search.html", "py-modindex.html", "_", "whatsnew/changelog.html")
    files = [f for f in sorted(folder.rglob("*.html")) if not f.relative_to(folder).as_posix().startswith(skip)]
    files = files[:limit] if limit else files
    if workers == 1:
        sections = [read_page(f) for f in files]
    else:
        with ProcessPoolExecutor(workers or None) as pool:
            sections = list(pool.map(read_page, files, chunksize=8))
    pages, titles = [], set()
    for path, secs in zip(files, sections, strict=True):
        if secs and secs[0][0] == 1 and secs[0][1] not in titles:
            titles.add(secs[0][1])
            pages.append((path.relative_to(folder).as_posix(), secs))
    return pages


def pages_retrieval(pages: list[tuple[str, list]], min_words: int = 20):
    """`build_demo_retrieval`'s rules on Sphinx pages: the collection is every paragraph of `min_words`+ words of
    every page; each held-out page (`is_held_out` on its title) queries with its title (relevant: all its
    paragraphs) and with "title: heading" per section (relevant: the section's and its subsections')."""
    from tasks.evaluate.data import _SKIP_HEADINGS, RetrievalSet, is_held_out

    doc_ids, docs, query_ids, queries, relevant = [], [], [], [], []
    for path, sections in pages:
        title = sections[0][1]
        rows_of = []
        for level, heading, paragraphs in sections:
            rows = []
            for paragraph in paragraphs:
                if len(paragraph.split()) >= min_words:
                    rows.append(len(docs))
                    doc_ids.append(f"{path}#p{len(docs)}")
                    docs.append(paragraph)
            rows_of.append((level, heading, rows))
        if not is_held_out(title, HELD_OUT_PERCENT):
            continue
        everything = {r for *_, rows in rows_of for r in rows}
        if everything:
            query_ids.append(path)
            queries.append(title)
            relevant.append(everything)
        for s, (level, heading, rows) in enumerate(rows_of[1:], start=1):
            if heading.lower() in _SKIP_HEADINGS:
                continue
            owned = set(rows)
            for sub_level, _, sub_rows in rows_of[s + 1 :]:
                if sub_level <= level:
                    break
                owned.update(sub_rows)
            if owned:
                query_ids.append(f"{path}#s{s}")
                queries.append(f"{title}: {heading}")
                relevant.append(owned)
    return RetrievalSet("python-docs-heldout", query_ids, queries, doc_ids, docs, relevant)


def write_if_changed(path: Path, data: bytes) -> Path:
    """An unchanged file keeps its mtime (part of the ingest fingerprint): a rerun reuses the stages' outputs."""
    if not path.exists() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return path


def domain_corpus(ctx: Ctx) -> tuple[str, Path, Any]:
    """(name, corpus file for build-pairs, held-out retrieval set): the Python documentation (Sphinx HTML, as
    Debian's python3-doc installs it) as JSON Lines of title + paragraphs, else a MediaWiki dump (default: the
    demo's Wikipedia sample) with `build_demo_retrieval`."""
    from tasks.evaluate.data import DemoRetrievalConfig, build_demo_retrieval
    from tasks.ingest.readers import default_corpus

    sz, arg = ctx.sizes, ctx.args.corpus
    source = Path(arg) if arg != "auto" else None
    if source is None:
        found = [
            h for h in sorted(Path("/usr/share/doc").glob("python3*/html")) if (h / "library/index.html").is_file()
        ]
        source = found[0] if found else default_corpus()
    if source.is_dir():
        pages = python_doc_pages(source, sz.corpus_pages, ctx.args.workers)
        lines = [
            json.dumps({"id": path, "title": secs[0][1], "text": "\n\n".join(p for *_, ps in secs for p in ps)})
            for path, secs in pages
        ]
        corpus = ctx.work / "corpus" / f"python-docs-{len(pages)}.jsonl"
        write_if_changed(corpus, ("\n".join(lines) + "\n").encode("utf-8"))
        return f"Python documentation ({source}, {len(pages)} pages)", corpus, pages_retrieval(pages)
    retrieval = build_demo_retrieval(DemoRetrievalConfig(max_articles=sz.retrieval_articles), path=source)
    limit = f", retrieval on its first {sz.retrieval_articles} articles" if sz.retrieval_articles else ""
    return f"Wikipedia dump ({source.name}{limit})", source, retrieval


def build_shards(ctx: Ctx, corpus: Path) -> tuple[Path, dict[str, int]]:
    """`build-pairs`'s four stages (their task functions, no Prefect) on the corpus, documents held out by title."""
    from flows.build_pairs import stage_configs
    from storage.stage_output import ref_dir, ref_manifest
    from tasks.ingest.task import ingest, require_documents
    from tasks.pair.task import pair
    from tasks.shuffle.task import shuffle
    from tasks.split.task import split

    configs = stage_configs(input_path=str(corpus), holdout_percent=HELD_OUT_PERCENT)
    root, workers = str(ctx.work), ctx.args.workers
    documents = stage_fn(ingest, str(corpus), configs.ingest, root, workers=workers)
    require_documents(ctx.work, documents, False)
    sentences = stage_fn(split, documents, configs.split, root, workers=workers)
    pairs = stage_fn(pair, sentences, configs.pair, root, workers=workers)
    shards = stage_fn(shuffle, pairs, configs.shuffle, root)
    rows = {
        "documents": ref_manifest(ctx.work, documents)["rows"].get("documents", 0),
        "sentences": ref_manifest(ctx.work, sentences)["rows"].get("sentences", 0),
        "pairs": ref_manifest(ctx.work, shards)["rows"].get("rows_out", 0),
        "documents_with_pairs": ref_manifest(ctx.work, pairs)["rows"].get("documents", 0),
    }
    return ref_dir(ctx.work, shards), rows
