"""The corpus ladder's large rung (`docs-100k`): 100,000+ sections of real documentation installed from the
package registries, one folder a user could point a night at.

    apt-get install -y python3-doc rust-doc manpages manpages-dev linux-doc-6.1 postgresql-doc-15 cmake-doc git-doc
    .venv/bin/python benchmarks/corpus_ladder.py --workdir WORK --corpora docs-100k

It holds, each part in a folder of its own (every record's page is its label for the labelled check):
- `man/`: every manual page (`/usr/share/man/man1` to `man8`, without the Google Cloud SDK's generated
  pages), one JSONL record per section of a page (man_pages.py: `man_corpus`, no cap on the count);
- `python/`: the Python documentation's reST sources, one record per section (gate_ladder.py: `docs_corpus`);
- `rust/`: links to `rust-doc`'s HTML (the Rust book and its companion books, the standard library's reference,
  and the architecture intrinsics of x86-64, AArch64 and WebAssembly), read by ingest's HTML reader: a document
  per h1-h3 section, its page as its label. Left out as copies of pages kept: `core` and `alloc` outside
  `core::arch` (the standard library re-exports them with the same text), the other architectures' intrinsics
  (x86's and ARM's are x86-64's and AArch64's again), `core_arch`, and the source listings (`src/`); and
  redirect pages (a re-export's page that only points at the item's);
- `linux/`, `postgresql/`, `cmake/`, `git/`: links to the HTML of the Linux kernel's documentation, PostgreSQL's
  manual, CMake's and Git's documentation (`linux-doc-6.1`, `postgresql-doc-15`, `cmake-doc`, `git-doc`), read
  the same way (Sphinx's `_sources` copies and assets left out).
Nothing is copied from the packages' own files but the manual pages' and reST sources' text, cut into records.
"""

from __future__ import annotations

import json
from pathlib import Path

import harness  # noqa: F401 - the repository and benchmarks/ on the path, for what it imports

DOC = Path("/usr/share/doc")
RUST_DOC = DOC / "rust-doc" / "html"
RUST_PARTS = (
    "book", "reference", "nomicon", "rust-by-example", "edition-guide", "embedded-book", "unstable-book",
    "rustc", "rustdoc", "std", "proc_macro", "test", "core/arch/x86_64", "core/arch/aarch64", "core/arch/wasm32",
)  # fmt: skip
# More documentation sites of the same kind (HTML, each page's sections its records), the parts that take the rung
# past 100,000 sections: the Linux kernel's Sphinx documentation, PostgreSQL's manual, CMake's and Git's.
SITES = {
    "linux": DOC / "linux-doc-6.1",
    "postgresql": DOC / "postgresql-doc-15",
    "cmake": DOC / "cmake-data" / "html",
    "git": DOC / "git-doc",
}
SKIP_DIRS = ("_sources", "_static", "_images")  # Sphinx's copies of the sources and its assets
PACKAGES = {
    "man": "manpages, manpages-dev",
    "python": "python3-doc",
    "rust": "rust-doc",
    "linux": "linux-doc-6.1",
    "postgresql": "postgresql-doc-15",
    "cmake": "cmake-doc",
    "git": "git-doc",
}


def is_redirect(path: Path) -> bool:
    """A page that only sends the browser to another (`<meta http-equiv="refresh">`, rustdoc's re-exports)."""
    with open(path, "rb") as f:
        head = f.read(2048).lower()  # the head only: a reference page can be megabytes
    return b'http-equiv="refresh"' in head or b"<title>redirection</title>" in head


def rust_pages(source: Path, out: Path) -> dict[str, int]:
    """Links in `out` to the chosen rust-doc parts' HTML pages, in their own layout; counts."""
    return html_pages(source, RUST_PARTS, out, "rust")


def html_pages(source: Path, parts: tuple[str, ...], out: Path, name: str) -> dict[str, int]:
    """Links in `out` to the HTML pages under `source`'s `parts`, in their own layout (Sphinx's source copies
    and assets left out); counts of pages and of redirects left out."""
    pages = redirects = 0
    for part in parts:
        folder = source / part
        if not folder.is_dir():
            raise SystemExit(f"{folder}: missing; the large rung needs `apt-get install -y {PACKAGES[name]}`")
        for page in sorted(folder.rglob("*.html")):
            if set(page.relative_to(source).parts) & set(SKIP_DIRS):
                continue
            if is_redirect(page):
                redirects += 1
                continue
            link = out / page.relative_to(source)
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                link.symlink_to(page)  # a link: the installed documentation is never copied
            pages += 1
    return {"pages": pages, "redirects_left_out": redirects}


def large_corpus(out: Path) -> dict[str, dict[str, int]]:
    """Builds the rung's three folders under `out`; counts per part."""
    from gate_ladder import PYTHON_DOCS, docs_corpus
    from man_pages import MAN, man_corpus

    needed = {"man": MAN / "man1", "python": PYTHON_DOCS, "rust": RUST_DOC, **SITES}
    for part, where in needed.items():
        if not where.is_dir():
            raise SystemExit(f"{where}: missing; the large rung needs `apt-get install -y {PACKAGES[part]}`")
    counts = {
        "man": man_corpus(MAN, out / "man", target=10**9),
        "python": docs_corpus(PYTHON_DOCS, out / "python"),
        "rust": rust_pages(RUST_DOC, out / "rust"),
        **{name: html_pages(where, (".",), out / name, name) for name, where in SITES.items()},
    }
    print("large rung: " + json.dumps(counts), flush=True)
    return counts


class TreeMemory:
    """The peak resident memory of this process and every process it started (the night's training and Dask
    workers, the temporary Prefect server), sampled from /proc once a second in a thread: the sum over the tree
    (`peak_bytes`; pages they share count twice: an upper bound) and the largest one process reached
    (`peak_process_bytes`, with its command line's start in `peak_process`)."""

    def __init__(self, every_s: float = 1.0):
        import threading

        self.every_s, self.peak_bytes, self.peak_process_bytes, self.peak_process = every_s, 0, 0, ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        import os

        while not self._stop.is_set():
            each = tree_rss_each(os.getpid())
            self.peak_bytes = max(self.peak_bytes, sum(each.values()))
            if each and (top := max(each, key=each.get)) and each[top] > self.peak_process_bytes:
                self.peak_process_bytes, self.peak_process = each[top], _command(top)
            self._stop.wait(self.every_s)

    def line(self) -> str:
        return (
            f"peak {self.peak_bytes / 2**30:.2f} GiB summed over the processes, "
            f"{self.peak_process_bytes / 2**30:.2f} GiB the largest one ({self.peak_process})"
        )


def tree_rss(root: int) -> int:
    """Resident bytes of process `root` and its descendants."""
    return sum(tree_rss_each(root).values())


def tree_rss_each(root: int) -> dict[int, int]:
    """{pid: resident bytes} of process `root` and its descendants (from /proc/<pid>/stat and /proc/<pid>/statm)."""
    import os

    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    out, todo, page = {}, [root], os.sysconf("SC_PAGE_SIZE")
    while todo:
        pid = todo.pop()
        try:
            out[pid] = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            pass
        todo.extend(children.get(pid, []))
    return out


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()[:80]
    except OSError:
        return "?"
