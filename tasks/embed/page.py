"""The local search page: one query box, three result lists side by side (champion, its start model, BM25).

    page = SearchPage.open(root)                 # the three searchers, loaded once
    serve_page(page, port=8765)                  # http://127.0.0.1:8765/?q=...&k=10

Served by the standard library's threading HTTP server on 127.0.0.1 only, rendered on the server
(no script, no CDN): a form GET reloads the page with `?q=`. A start model the corpus was never
embedded with is embedded once when the page opens (a stage output like any other, not made the
`embeddings` view). After the night switches the `embeddings` view to a new champion, the next
query reloads the columns.
"""

from __future__ import annotations

import html
import logging
import sys
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from tasks.embed.search import Bm25Searcher, DenseSearcher, check_query, read_documents, result_rows

log = logging.getLogger(__name__)
HOST = "127.0.0.1"  # never another interface: the page shows the user's documents
PORT = 8765


@contextmanager
def talk():
    """The page's preparation said on standard output while the block runs (the CLI's `gur search-page`)."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def ensure_embedded(root: Path, model: str, documents: dict[str, str]) -> None:
    """Embed `documents` with `model` unless an output exists (the page's start-model column)."""
    from tasks.embed.model_choice import choose_model
    from tasks.embed.outputs import find_output
    from tasks.embed.task import embed_stage
    from tasks.embed.vectors import EmbedConfig, resolve_precision

    chosen = choose_model(root, model)
    if find_output(root, chosen.fingerprint, documents["fingerprint"]) is None:
        log.info("page: embedding the documents of %s with the start model %s (once; progress every 10 s)",
                 documents["path"], chosen.spec)  # fmt: skip
        config = EmbedConfig(chosen.fingerprint, chosen.path, precision=resolve_precision("auto"))
        embed_stage(documents, config, root, log, workers=0)


class SearchPage:
    """The columns of the page: (label, searcher) for the embeddings in use, the start model, BM25."""

    def __init__(self, root: Path, k: int = 10):
        self.root, self.k, self.lock = root, k, threading.Lock()
        self.loaded_for: str | None = None
        self.columns: list[tuple[str, str, Any]] = []

    @classmethod
    def open(cls, root: Path, k: int = 10) -> SearchPage:
        page = cls(root, k)
        page.reload()
        return page

    def reload(self) -> None:
        from tasks.embed.model_choice import start_model
        from tasks.embed.outputs import read_active

        log.info("page: loading the embeddings in use")
        current = DenseSearcher.open(self.root)
        start = start_model(self.root, current.model_path)
        ensure_embedded(self.root, start, current.documents)
        starting = DenseSearcher.open(self.root, start) if start else None
        if starting is not None and (starting.documents != current.documents or starting.model_fp == current.model_fp):
            starting = None  # another corpus's vectors, or the same model twice: no column
        columns = [("champion" if self.is_champion(current.model_path) else "in use", current.model_path, current)]
        if starting is not None:
            columns.append(("start model", starting.model_path, starting))
        log.info("page: the BM25 index of %s (built once, then read)", current.documents["path"])
        columns.append(("BM25", "bm25s over title + text", Bm25Searcher(self.root, current.documents, log=log)))
        self.columns, self.documents = columns, current.documents
        self.loaded_for = (read_active(self.root) or {}).get("fingerprint")

    def is_champion(self, path: str) -> bool:
        from storage.champion import read_champion

        champion = read_champion(self.root)
        return champion is not None and Path(champion["export"]).resolve() == Path(path).resolve()

    def results(self, query: str) -> list[dict[str, Any]]:
        from tasks.embed.outputs import read_active
        from tasks.embed.search import documents_glob

        query = check_query(query)
        with self.lock:  # one query at a time: the models are not shared across threads
            if (read_active(self.root) or {}).get("fingerprint") != self.loaded_for:
                self.reload()
            lists = [(label, model, searcher.search(query, self.k)) for label, model, searcher in self.columns]
            # The champion can change by hand (gur promote, gur rollback) while search keeps these embeddings:
            # the first column says which it is now, not at the last reload.
            _, model, hits = lists[0]
            lists[0] = ("champion" if self.is_champion(model) else "in use", model, hits)
            wanted = sorted({doc_id for *_, hits in lists for doc_id, _ in hits})
            docs = read_documents(documents_glob(self.root, self.documents), wanted)
        return [{"label": lb, "model": m, "hits": result_rows(docs, hits, query)} for lb, m, hits in lists]


STYLE = """
body { font: 15px system-ui, sans-serif; margin: 1.5em; }
form { margin-bottom: 1em; } input[name=q] { width: 40em; font-size: 1em; padding: .3em; }
.columns { display: flex; gap: 1.5em; align-items: flex-start; }
.column { flex: 1; min-width: 0; } .column h2 { font-size: 1.1em; margin: 0; } .model { color: #666; font-size: .8em;
  overflow-wrap: anywhere; }
ol { padding-left: 1.4em; } li { margin: .6em 0; } .score { color: #666; font-size: .85em; }
.snippet { font-size: .9em; } .error { color: #b00; }
"""


def render(query: str, columns: list[dict[str, Any]] | None, error: str = "") -> str:
    """The whole page: the form, then one column per list (or the error on one line)."""
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>gur search</title>",
        f"<style>{STYLE}</style></head><body>",
        "<form method='get' action='/'><input name='q' id='q' autofocus placeholder='a query in your domain' "
        f"value='{e(query, quote=True)}'> <button type='submit' id='go'>Search</button></form>",
    ]
    if error:
        parts.append(f"<p class='error' id='error'>{e(error)}</p>")
    if columns:
        parts.append("<div class='columns'>")
        for i, column in enumerate(columns):
            parts.append(
                f"<div class='column' id='column-{i}' data-label='{e(column['label'], quote=True)}'>"
                f"<h2>{e(column['label'])}</h2><div class='model'>{e(column['model'])}</div><ol>"
            )
            for hit in column["hits"]:
                parts.append(
                    f"<li class='hit' data-doc-id='{e(hit.doc_id, quote=True)}'><b>{e(hit.title or hit.doc_id)}</b> "
                    f"<span class='score'>{hit.score:.4f}</span><div class='snippet'>{e(hit.snippet)}</div></li>"
                )
            if not column["hits"]:
                parts.append("<li class='none'>no match</li>")
            parts.append("</ol></div>")
        parts.append("</div>")
    parts.append("</body></html>")
    return "".join(parts)


def handler_for(page: SearchPage) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the standard library's name
            url = urlparse(self.path)
            if url.path != "/":
                self.send_error(404)
                return
            query = (parse_qs(url.query).get("q") or [""])[0]
            columns, error = None, ""
            if query.strip():
                try:
                    columns = page.results(query)
                except Exception as exc:  # shown on the page as one line, the server keeps serving
                    error = f"{type(exc).__name__}: {exc}"
            body = render(query, columns, error).encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug(format, *args)

    return Handler


def make_server(page: SearchPage, port: int = PORT) -> ThreadingHTTPServer:
    """Bound to 127.0.0.1 (`port` 0: a free one, see `server.server_address`)."""
    return ThreadingHTTPServer((HOST, port), handler_for(page))
