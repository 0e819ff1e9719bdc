"""How well and how fast the HTML reader reads pages, against a ground truth the machine has.

    flock /tmp/heavy.lock .venv/bin/python benchmarks/ingest_formats.py [--pages 60] [--warc-mb 100]

The Python documentation ships its reST sources beside its HTML (Debian's `python3-doc`: `html/` and
`html/_sources/`). For a sample of pages (every n-th page with a source, sorted), each extractor's sections
are scored against the page's source:
- recall: the share of the source's prose words (the reST reader's paragraphs: `tasks/ingest/markup_text.py`,
  code and directives' machinery dropped) found in the extracted text, counted with multiplicity;
- absent: the share of extracted words that the source file does not hold anywhere (navigation, boilerplate);
- sections: h1-h3 sections found against the source's headings of the first three levels; and against those
  of them with prose of their own before the next one (a paragraph, or a deeper heading's), since a heading
  whose section is empty (a group heading followed at once by its first subsection) gives no document.
A page passes with recall >= .95, absent <= 3% and a section count within 10% of the source's headings; the
report gives the same with the count against headings with prose ("with prose"), and with prose and absent
counted without the annotations Sphinx and CPython's extensions render from a directive or a data file
("annotations": `ANNOTATIONS`, such as "Changed in version 3.9", "Part of the Stable ABI", "Return value: New
reference"): page text, not navigation, that the reST source spells as a directive or does not hold.
Extractors: the product's reader (resiliparse's main content, sections at its h1-h3 markers) and
trafilatura (its XML output with headings; code blocks left out). Speed: pages per CPU second (each page's
fastest of seven interleaved rounds, summed) through the product's reader (`read_file(..., "html")`:
decoding, extraction, sections, records) against resiliparse called alone (parse +
`extract_plain_text(main_content=True)`), and a synthetic WARC of `--warc-mb` MB (the sample pages as
responses with distinct URLs, every tenth record an image) read in a child process: MB per CPU second and
the child's peak memory above its memory after imports; and one page of 4,000 list items left open (no `</p>`,
no `</li>`), whose reading must stay linear in its size.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from itertools import pairwise
from pathlib import Path

import harness

HTML = Path("/usr/share/doc/python3-doc/html")
WORD = re.compile(r"[^\W_]+")
RECALL, ABSENT, SECTIONS = 0.95, 0.03, 0.10
# What the documentation's generator adds to a page around the source's prose: version notes, admonition titles,
# the C API's stable-ABI and reference-count notes (from data files), audit-event and availability lines, and
# section numbers. Left out of the "annotations" absent share only; recall and the bounds in the words
# count everything.
VERSION = r"\d+(?:\.\d+)*"
ANNOTATIONS = re.compile(
    "|".join(
        [
            rf"(?:Changed|Added|New) in version {VERSION}",
            rf"Deprecated since version {VERSION}(?:, (?:will be )?removed in version {VERSION})?",
            rf"Part of the (?:Stable ABI|Limited API)(?: \(as an opaque struct\))?(?: since version {VERSION})?"
            r"(?: \(including all members\))?",
            r"Return value: (?:New|Borrowed) reference",
            r"Raises an auditing event \S+ with (?:no )?arguments",
            r"Availability(?=:)|not Emscripten, not WASI",
            r"This module does not work or is not available on WebAssembly platforms wasm32-emscripten and "
            r"wasm32-wasi\. See WebAssembly platforms for more information",
            r"^(?:Note|Warning|See also|Important|Tip|Caution|Attention|Hint|Danger|Error)$",
            rf"^{VERSION}\.(?= )",
        ]
    ),
    re.M,
)


def words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def sample_pages(html: Path, n: int) -> list[tuple[Path, Path]]:
    """Every k-th (page, source) pair in sorted order, `n` of them."""
    pairs = []
    for page in sorted(html.rglob("*.html")):
        rel = page.relative_to(html).as_posix()
        source = html / "_sources" / (rel.removesuffix(".html") + ".rst.txt")
        if not rel.startswith("_") and source.is_file():
            pairs.append((page, source))
    step = max(1, len(pairs) // n)
    return pairs[::step][:n]


def truth(source: Path) -> tuple[Counter, set[str], int, int]:
    """The source's prose words (with counts), every word in the file, its headings of levels 1-3, and those of
    them whose section (up to the next heading of levels 1-3) holds prose."""
    from tasks.ingest.markup_text import rst_blocks

    text = source.read_text(encoding="utf-8", errors="replace")
    blocks = rst_blocks(text)
    prose = Counter(w for _, block in blocks for w in words(block))
    cuts = [i for i, (level, _) in enumerate(blocks) if 1 <= level <= 3] + [len(blocks)]
    with_prose = sum(1 for a, b in pairwise(cuts) if any(level == 0 for level, _ in blocks[a + 1 : b]))
    return prose, set(words(text)), len(cuts) - 1, with_prose


def product_sections(data: bytes) -> list[tuple[str, str]]:
    from tasks.ingest.html_text import html_page

    page = html_page(data)
    return [(s.heading or "", s.text) for s in page.sections]


def trafilatura_sections(data: bytes) -> list[tuple[str, str]]:
    """trafilatura's main content with its headings (XML output); block-level code is not prose."""
    import trafilatura
    from lxml import etree

    xml = trafilatura.extract(
        data, output_format="xml", include_formatting=True, include_tables=True, favor_recall=True
    )
    if not xml:
        return []
    sections: list[tuple[str, list[str]]] = [("", [])]
    for element in etree.fromstring(xml.encode()).iter():
        if element.tag == "head" and element.get("rend") in ("h1", "h2", "h3"):
            sections.append(("".join(element.itertext()).strip().rstrip("¶").strip(), []))
        elif element.tag in ("p", "item", "cell", "quote", "head") and element.getparent().tag != "code":
            sections[-1][1].append("".join(element.itertext()))
    return [(h, "\n".join(t)) for h, t in sections if h or any(x.strip() for x in t)]


def score(
    sections: list[tuple[str, str]], prose: Counter, vocabulary: set[str], headings: int, with_prose: int
) -> dict:
    got = Counter(w for heading, text in sections for w in words(heading + " " + text))
    found = sum(min(n, got[w]) for w, n in prose.items())
    counted = sum(1 for heading, _ in sections if heading)

    def absent(counts: Counter) -> float:
        return sum(n for w, n in counts.items() if w not in vocabulary) / max(1, sum(counts.values()))

    plain = Counter(w for heading, text in sections for w in words(ANNOTATIONS.sub(" ", heading + "\n" + text)))
    result = {
        "recall": found / max(1, sum(prose.values())),
        "absent": absent(got),
        "absent_annotations": absent(plain),
        "sections": counted,
        "headings": headings,
    }
    result["sections_ok"] = abs(counted - headings) <= SECTIONS * max(1, headings)
    result["sections_ok_prose"] = abs(counted - with_prose) <= SECTIONS * max(1, with_prose)
    words_ok = result["recall"] >= RECALL and result["absent"] <= ABSENT
    result["pass"] = words_ok and result["sections_ok"]
    result["pass_prose"] = words_ok and result["sections_ok_prose"]
    result["pass_annotations"] = (
        result["recall"] >= RECALL and result["absent_annotations"] <= ABSENT and result["sections_ok_prose"]
    )
    return result


def quality(pages: list[tuple[Path, Path]]) -> dict[str, dict]:
    extractors = {"product (resiliparse)": product_sections, "trafilatura": trafilatura_sections}
    names = [page.as_posix().split("/html/", 1)[-1] for page, _ in pages]
    truths = [truth(source) for _, source in pages]  # each source parsed once, for every extractor
    out = {}
    for name, extract in extractors.items():
        rows = [score(extract(page.read_bytes()), *known) for (page, _), known in zip(pages, truths, strict=True)]
        n = len(rows)
        out[name] = {
            "pages": n,
            "mean_recall": sum(r["recall"] for r in rows) / n,
            "recall_ok": sum(r["recall"] >= RECALL for r in rows) / n,
            "mean_absent": sum(r["absent"] for r in rows) / n,
            "absent_ok": sum(r["absent"] <= ABSENT for r in rows) / n,
            "sections_ok": sum(r["sections_ok"] for r in rows) / n,
            "sections_found": sum(r["sections"] for r in rows),
            "headings": sum(r["headings"] for r in rows),
            "all_ok": sum(r["pass"] for r in rows) / n,
            "sections_ok_prose": sum(r["sections_ok_prose"] for r in rows) / n,
            "all_ok_prose": sum(r["pass_prose"] for r in rows) / n,
            "annotations: mean_absent": sum(r["absent_annotations"] for r in rows) / n,
            "annotations: absent_ok": sum(r["absent_annotations"] <= ABSENT for r in rows) / n,
            "annotations: all_ok_prose": sum(r["pass_annotations"] for r in rows) / n,
            "failing (annotations, with prose)": [
                p for p, r in zip(names, rows, strict=True) if not r["pass_annotations"]
            ],
        }
    return out


def speed(pages: list[tuple[Path, Path]], repeat: int = 7) -> dict:
    """CPU seconds for the pages through each, as the sum over pages of each page's fastest of `repeat`
    interleaved rounds: on a shared VM a slow spell inflates single rounds, not every round of one page."""
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    from tasks.ingest.readers import ReaderConfig, read_file

    config = ReaderConfig()

    def alone(page: Path) -> None:
        extract_plain_text(HTMLTree.parse_from_bytes(page.read_bytes(), "utf-8"), main_content=True)

    def product(page: Path) -> None:
        for _ in read_file(page, config, "html", label=page.name):
            pass

    runs = (("resiliparse alone", alone), ("product reader", product))
    best = {name: [float("inf")] * len(pages) for name, _ in runs}
    for _ in range(repeat):
        for i, (page, _) in enumerate(pages):
            for name, run in runs:
                start = time.process_time()
                run(page)
                best[name][i] = min(best[name][i], time.process_time() - start)
    timings = {name: {"cpu_s": sum(cpu), "pages_per_cpu_s": len(pages) / sum(cpu)} for name, cpu in best.items()}
    timings["product / alone"] = timings["product reader"]["cpu_s"] / timings["resiliparse alone"]["cpu_s"]
    return timings


def write_warc(path: Path, pages: list[tuple[Path, Path]], megabytes: int) -> int:
    """A WARC of about `megabytes` MB: the pages as 200 responses with distinct URLs, every tenth an image."""
    blobs = [page.read_bytes() for page, _ in pages]
    written, n = 0, 0
    with open(path, "wb") as out:
        while written < megabytes * 1_000_000:
            n += 1
            image = n % 10 == 0
            body = b"\x89PNG fake image bytes" * 50 if image else blobs[n % len(blobs)]
            kind = "image/png" if image else "text/html; charset=utf-8"
            payload = f"HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\n\r\n".encode() + body
            head = (
                f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: https://docs.example/{n}\r\n"
                f"WARC-Record-ID: <urn:uuid:{n:032d}>\r\nContent-Type: application/http; msgtype=response\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n"
            )
            record = head.encode() + payload + b"\r\n\r\n"
            out.write(record)
            written += len(record)
    return n


CHILD = """
import json, resource, sys, time
sys.path.insert(0, {repo!r})
from collections import Counter
from pathlib import Path
from tasks.ingest.readers import ReaderConfig, read_file, Record, Tally
import tasks.ingest.page_readers, tasks.ingest.html_text, fastwarc.warc, resiliparse.extract.html2text
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.process_time()
counts = Counter()
for item in read_file(Path({path!r}), ReaderConfig(), "warc", label="bench.warc"):
    counts[item.key if isinstance(item, Tally) else type(item).__name__] += 1
cpu = time.process_time() - start
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"cpu_s": cpu, "rss_before_mb": before / 1024, "rss_peak_mb": after / 1024, "counts": counts}}))
"""


def warc_throughput(pages: list[tuple[Path, Path]], megabytes: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.warc"
        records = write_warc(path, pages, megabytes)
        size = path.stat().st_size
        child = CHILD.format(repo=str(harness.REPO), path=str(path))
        result = json.loads(
            subprocess.run([sys.executable, "-c", child], check=True, capture_output=True, text=True).stdout
        )
    result.update(
        records=records,
        mb=size / 1e6,
        mb_per_cpu_s=size / 1e6 / result["cpu_s"],
        peak_above_imports_mb=result["rss_peak_mb"] - result["rss_before_mb"],
    )
    return result


def open_items(items: int = 4000) -> dict:
    """CPU seconds for one page of `items` list items whose `</p>` and `</li>` are left out (valid HTML), each with
    a link, through the product's reader and resiliparse alone: the reader's passes over the bytes stay linear."""
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    from tasks.ingest.html_text import html_page

    item = b'<li><p>Item %d names <a href="#f%d">a function</a> and more words'
    body = b"".join(item % (i, i) for i in range(items))
    page = b"<html><body><main><h1>Open items</h1><ul>" + body + b"</ul></main></body></html>"
    timings = {"items": items, "bytes": len(page)}
    for name, run in (
        ("resiliparse alone", lambda: extract_plain_text(HTMLTree.parse_from_bytes(page, "utf-8"), main_content=True)),
        ("product reader", lambda: html_page(page)),
    ):
        start = time.process_time()
        run()
        timings[f"{name} cpu_s"] = time.process_time() - start
    return timings


def main() -> None:
    parser = harness.parser(__doc__, workdir=None)
    parser.add_argument("--html", default=str(HTML), help="the Python docs' HTML (apt-get install python3-doc)")
    parser.add_argument("--pages", type=int, default=60, help="pages sampled (every n-th with a source)")
    parser.add_argument("--warc-mb", type=int, default=100, help="size of the synthetic WARC (0: skip)")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    pages = sample_pages(Path(args.html), args.pages)
    report = {"quality": quality(pages), "speed": speed(pages), "open list items": open_items()}
    if args.warc_mb:
        report["warc"] = warc_throughput(pages, args.warc_mb)
    text = json.dumps(report, indent=2)
    print(text)
    title = f"The HTML reader on {len(pages)} pages of the Python documentation"
    harness.record(args, title, ["```json", text, "```"], report)


if __name__ == "__main__":
    main()
