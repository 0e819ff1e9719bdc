"""GUR's corpus for the `gur-scratch` part and its held-out retrieval set: the Python documentation's HTML pages
read by the product's HTML reader (tasks/ingest/html_text.py), the set built by the product's section-retrieval
rules (tasks/evaluate/data.py: `SectionRetrieval`), the pairs by build-pairs' four stages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpu_suite.harness import Ctx, stage_fn
from gpu_suite.settings import HELD_OUT_PERCENT

SKIPPED_PAGES = ("genindex", "search.html", "py-modindex.html", "_", "whatsnew/changelog.html")
MIN_WORDS = 20  # a paragraph shorter than this is no document of the retrieval set (as build_demo_retrieval)


def read_page(path: Path) -> tuple[str | None, list[tuple[int, str | None, list[str]]]]:
    """(title, sections) of one HTML page by the product's reader: (level, heading, paragraphs) per section, the
    title's own section (the text under the h1) as the lead with no heading."""
    from tasks.ingest.html_text import html_page

    page = html_page(path.read_bytes())
    sections = []
    for i, section in enumerate(page.sections):
        lead = i == 0 and section.level <= 1 and section.heading in (None, page.title)
        paragraphs = [line for line in section.text.splitlines() if line.strip()]
        sections.append((1 if lead else section.level, None if lead else section.heading, paragraphs))
    return page.title, sections


def python_doc_pages(folder: Path, limit: int, workers: int) -> list[tuple[str, str, list]]:
    """(path, title, sections) of every page with a title, the first page of each title; the indexes, the search
    page and the changelog (a 3 MB list of bug numbers) left out."""
    from concurrent.futures import ProcessPoolExecutor

    files = [
        f for f in sorted(folder.rglob("*.html")) if not f.relative_to(folder).as_posix().startswith(SKIPPED_PAGES)
    ]
    files = files[:limit] if limit else files
    if workers == 1:
        read = [read_page(f) for f in files]
    else:
        with ProcessPoolExecutor(workers or None) as pool:
            read = list(pool.map(read_page, files, chunksize=8))
    pages, titles = [], set()
    for path, (title, sections) in zip(files, read, strict=True):
        if title and sections and title not in titles:
            titles.add(title)
            pages.append((path.relative_to(folder).as_posix(), title, sections))
    return pages


def pages_retrieval(pages: list[tuple[str, str, list]]) -> Any:
    """The held-out pages' queries (`is_held_out` on the title) against every paragraph of `MIN_WORDS` words or
    more of every page: the product's `SectionRetrieval`, which `build_demo_retrieval` uses on a dump."""
    from tasks.evaluate.data import SectionRetrieval, is_held_out

    built = SectionRetrieval()
    for path, title, sections in pages:
        kept = [
            (level, heading, [p for p in paragraphs if len(p.split()) >= MIN_WORDS])
            for level, heading, paragraphs in sections
        ]
        built.add(path, title, kept, is_held_out(title, HELD_OUT_PERCENT))
    return built.result("python-docs-heldout")


def write_if_changed(path: Path, data: bytes) -> Path:
    """An unchanged file keeps its mtime (part of the ingest fingerprint): a rerun reuses the stages' outputs."""
    if not path.exists() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return path


def domain_corpus(ctx: Ctx) -> tuple[str, Path, Any]:
    """(name, corpus file for build-pairs, held-out retrieval set): the Python documentation (HTML, as Debian's
    python3-doc installs it) as JSON Lines of a page's title + paragraphs, else a MediaWiki dump (default: the
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
            json.dumps({"id": path, "title": title, "text": "\n\n".join(p for *_, ps in secs for p in ps)})
            for path, title, secs in pages
        ]
        corpus = ctx.work / "corpus" / f"python-docs-{len(pages)}.jsonl"
        write_if_changed(corpus, ("\n".join(lines) + "\n").encode("utf-8"))
        return f"Python documentation ({source}, {len(pages)} pages)", corpus, pages_retrieval(pages)
    retrieval = build_demo_retrieval(DemoRetrievalConfig(max_articles=sz.retrieval_articles), path=source)
    limit = f", retrieval on its first {sz.retrieval_articles} articles" if sz.retrieval_articles else ""
    limit += f", pairs from its first {sz.corpus_articles} articles" if sz.corpus_articles else ""
    name = f"Wikipedia dump ({source.name}{limit})"
    corpus = first_articles(source, sz.corpus_articles, ctx.work / "corpus") if sz.corpus_articles else source
    return name, corpus, retrieval


def first_articles(dump: Path, n: int, folder: Path) -> Path:
    """The dump's first `n` articles as JSON Lines (the product's MediaWiki reader): `--smoke` pairs a few dozen
    articles, not the whole sample (its data stages took most of the part's minute on two cores)."""
    from tasks.ingest.readers import ReaderConfig, read_mediawiki
    from tasks.ingest.records import Record

    lines = []
    for item in read_mediawiki(dump, ReaderConfig()):
        if isinstance(item, Record):
            lines.append(json.dumps({"id": item.source_id, "title": item.title, "text": item.text}))
            if len(lines) == n:
                break
    return write_if_changed(folder / f"{dump.name.split('.')[0]}-first-{n}.jsonl", ("\n".join(lines) + "\n").encode())


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
