"""The embed stage against sentence-transformers' `encode`, and search latency / recall at growing sizes.

    .venv/bin/python benchmarks/embed_search.py                      # every part (about 15 min on 2 cores)
    .venv/bin/python benchmarks/embed_search.py --parts throughput   # or latency, recall
    .venv/bin/python benchmarks/embed_search.py --faiss /tmp/faisspkg   # also faiss-cpu's HNSW (pip --target)

- throughput: MiniLM, batch 64, the same texts (StackOverflow titles and Wikipedia articles, which the
  model cuts at 256 word pieces), the stage's `encode_texts` and `SentenceTransformer.encode` in
  alternation, two rounds each: documents/s by wall clock and CPU seconds;
- latency: one query at a time over generated unit vectors (384-d): exact search (the evaluation's
  `exact_search`) at each size, usearch HNSW (the index `gur search` builds above EXACT_MAX) where
  `--hnsw-sizes` allows; p50 / p95 in ms, build time, recall@10 against exact on the same queries;
- recall: real MiniLM vectors of StackOverflow titles, held-out titles as queries, recall@10 of HNSW;
- scale: real MiniLM vectors of every sentence this machine has (StackOverflow titles, the Python
  documentation, the manual pages: about 400,000 distinct sentences), held-out sentences as queries;
  at each size exact search and a usearch HNSW built over the same rows (forced: `gur search` switches
  at EXACT_MAX), p50 / p95 and recall@10 against exact for several `expansion_search` values; the
  1,000,000 row set is the real vectors plus jittered copies of them (labelled as such). Vectors are
  cached under `--cache` in chunks, so a stopped run resumes;
- peak memory: the process's maximum RSS after each part (they run in increasing order of size).
"""

from __future__ import annotations

import os
import re
import resource
import sys
import time
from pathlib import Path

import harness
import numpy as np
from harness import shared_data

STACKOVERFLOW = shared_data("stackoverflow", "train.tsv")
show = harness.Lines()  # the figures each part prints, for the entry


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def unit_rows(n: int, dim: int = 384, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def timed(fn, *args):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def throughput(n_titles: int, n_articles: int, batch: int) -> dict:
    from models.encoders import minilm_path
    from samples.wiki_docs import wiki_documents
    from tasks.embed.vectors import document_texts, encode_texts, load_encoder
    from tasks.evaluate.data import load_stackoverflow

    articles = wiki_documents(n_articles, sentences=40)
    texts = load_stackoverflow(STACKOVERFLOW, limit=n_titles).texts
    texts += document_texts([a["title"] for a in articles], [a["text"] for a in articles])
    model = load_encoder(str(minilm_path()))
    import torch

    show(
        f"\n## throughput: {len(texts)} texts ({n_titles} titles, {len(articles)} articles), MiniLM, batch {batch}, "
        f"{torch.get_num_threads()} torch threads"
    )
    encode_texts(model, texts[:64], batch)  # warm-up
    results: dict[str, list[tuple[float, float]]] = {"stage encode_texts": [], "SentenceTransformer.encode": []}
    for _ in range(2):
        ours, wall, cpu = timed(encode_texts, model, texts, batch)
        results["stage encode_texts"].append((wall, cpu))
        theirs, wall, cpu = timed(
            lambda: model.encode(texts, batch_size=batch, normalize_embeddings=True, show_progress_bar=False)
        )
        results["SentenceTransformer.encode"].append((wall, cpu))
    show(f"max |difference| of the vectors: {np.abs(ours - theirs).max():.2e}")
    show("| encoder | docs/s (wall, best of 2) | CPU s (best of 2) | docs per CPU s |")
    show("|---|---|---|---|")
    figures: dict = {"texts": len(texts), "batch": batch}
    for name, runs in results.items():
        wall, cpu = min(r[0] for r in runs), min(r[1] for r in runs)
        show(f"| {name} | {len(texts) / wall:.1f} | {cpu:.1f} | {len(texts) / cpu:.1f} |")
        figures[name] = {"docs_per_s": len(texts) / wall, "cpu_s": cpu}
    ratio = min(r[1] for r in results["SentenceTransformer.encode"]) / min(r[1] for r in results["stage encode_texts"])
    show(f"CPU time ratio encode / stage: {ratio:.2f} (above 1: the stage is faster); peak RSS {peak_mb():.0f} MB")
    return {**figures, "cpu_ratio": ratio, "peak_rss_mb": peak_mb()}


def latencies(index, queries: np.ndarray, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
    times, found = [], []
    for q in queries:
        started = time.perf_counter()
        _, rows = index.search(q[None, :], k)
        times.append((time.perf_counter() - started) * 1000)
        found.append(rows[0])
    return np.array(times), np.array(found)


def recall_at(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth, strict=True)]))


def latency(sizes: list[int], hnsw_sizes: list[int], n_queries: int, faiss_path: str | None) -> list[dict]:
    import torch

    from tasks.embed.index import ExactIndex, HnswConfig, HnswIndex, Vectors

    show(f"\n## latency: generated 384-d unit vectors, {n_queries} single queries, {torch.get_num_threads()} threads")
    show("| vectors | search | build s | p50 ms | p95 ms | recall@10 vs exact | peak RSS MB |")
    show("|---|---|---|---|---|---|---|")
    rows = []
    for n in sizes:
        matrix = unit_rows(n)
        queries = unit_rows(n_queries, seed=1)
        exact = ExactIndex(Vectors([str(i) for i in range(n)], matrix, "generated"))
        times, truth = latencies(exact, queries)
        p50, p95 = np.percentile(times, 50), np.percentile(times, 95)
        show(f"| {n:,} | exact | - | {p50:.1f} | {p95:.1f} | 1 | {peak_mb():.0f} |")
        rows.append({"vectors": n, "search": "exact", "p50_ms": p50, "p95_ms": p95})
        if n in hnsw_sizes:
            index, build_s, _ = timed(HnswIndex.build, matrix, HnswConfig())
            times, found = latencies(index, queries)
            p50, p95, r = np.percentile(times, 50), np.percentile(times, 95), recall_at(found, truth)
            show(f"| {n:,} | usearch HNSW | {build_s:.0f} | {p50:.2f} | {p95:.2f} | {r:.3f} | {peak_mb():.0f} |")
            rows.append(
                {"vectors": n, "search": "usearch", "build_s": build_s, "p50_ms": p50, "p95_ms": p95, "recall": r}
            )
            del index
        if faiss_path and n in hnsw_sizes:
            sys.path.insert(0, faiss_path)
            import faiss

            faiss.omp_set_num_threads(1)
            index = faiss.IndexHNSWFlat(matrix.shape[1], 16, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction, index.hnsw.efSearch = 128, 128
            _, build_s, _ = timed(index.add, matrix)
            times, found = latencies(FaissSearch(index), queries)
            p50, p95, r = np.percentile(times, 50), np.percentile(times, 95), recall_at(found, truth)
            show(f"| {n:,} | faiss HNSWFlat | {build_s:.0f} | {p50:.2f} | {p95:.2f} | {r:.3f} | {peak_mb():.0f} |")
            rows.append(
                {"vectors": n, "search": "faiss", "build_s": build_s, "p50_ms": p50, "p95_ms": p95, "recall": r}
            )
        del matrix, exact
    return rows


class FaissSearch:
    def __init__(self, index) -> None:
        self.index = index

    def search(self, queries: np.ndarray, k: int):
        return self.index.search(queries, k)


def recall_real(n_docs: int, n_queries: int) -> dict:
    from models.encoders import minilm_path
    from tasks.embed.index import ExactIndex, HnswConfig, HnswIndex, Vectors
    from tasks.embed.vectors import encode_texts, load_encoder
    from tasks.evaluate.data import load_stackoverflow

    texts = list(dict.fromkeys(load_stackoverflow(STACKOVERFLOW).texts))
    docs, queries = texts[:n_docs], texts[-n_queries:]
    model = load_encoder(str(minilm_path()))
    vectors, wall, cpu = timed(encode_texts, model, docs + queries, 64)
    matrix, q = vectors[:n_docs], vectors[n_docs:]
    show(
        f"\n## recall on real vectors: {n_docs} StackOverflow titles (MiniLM, {wall:.0f} s to embed), "
        f"{n_queries} held-out titles as queries"
    )
    _, truth = latencies(ExactIndex(Vectors([str(i) for i in range(n_docs)], matrix, "minilm")), q)
    index, build_s, _ = timed(HnswIndex.build, matrix, HnswConfig())
    times, found = latencies(index, q)
    p50, p95, r = np.percentile(times, 50), np.percentile(times, 95), recall_at(found, truth)
    show(
        f"usearch HNSW: build {build_s:.1f} s, p50 {p50:.2f} ms, p95 {p95:.2f} ms, recall@10 {r:.3f}; "
        f"peak RSS {peak_mb():.0f} MB"
    )
    return {"documents": n_docs, "queries": n_queries, "build_s": build_s, "p50_ms": p50, "p95_ms": p95, "recall": r}


PYTHON_DOCS = Path("/usr/share/doc/python3-doc/html/_sources")
MAN = Path("/usr/share/man")
GROFF_ESCAPES = re.compile(r"\\f[BIRPC(\[][A-Z]*\]?|\\f\(..|\\\(..|\\\[[^\]]*\]|\\[&|^%:]|\\s[-+]?\d")


def keep_sentence(s: str) -> bool:
    return 30 <= len(s) <= 300 and re.search("[a-z]{3} [a-z]{2}", s) is not None


def python_doc_sentences() -> list[str]:
    """Prose paragraphs of the Python documentation's reST sources (directives, code and tables left out)."""
    from tasks.split.sentences import split_sentences

    found = []
    for path in sorted(PYTHON_DOCS.rglob("*.txt")):
        for para in re.split(r"\n\s*\n", path.read_text(encoding="utf-8", errors="replace")):
            if not para.lstrip().startswith(("..", ">>>", "::", "$", "|", "+-", "=")):
                found += [s for s in split_sentences(" ".join(para.split())) if keep_sentence(s)]
    return found


def man_sentences() -> list[str]:
    """Text lines of the manual pages (sections 1, 3, 5, 7, 8), groff requests and escapes removed."""
    import gzip

    from tasks.split.sentences import split_sentences

    found = []
    for section in ("man1", "man3", "man5", "man7", "man8"):
        for path in sorted((MAN / section).glob("*.gz")):
            try:
                lines = gzip.open(path, "rt", encoding="utf-8", errors="replace").read().splitlines()
            except (OSError, EOFError):
                continue
            para: list[str] = []
            for line in [*lines, ".PP"]:
                if not line.startswith((".", "'")):
                    para.append(line)
                elif para:
                    text = GROFF_ESCAPES.sub("", " ".join(para)).replace("\\-", "-").replace("\\e", "\\")
                    found += [s for s in split_sentences(" ".join(text.split())) if keep_sentence(s)]
                    para = []
    return found


def real_sentences(n_queries: int) -> tuple[list[str], list[str]]:
    """(documents, queries): every distinct sentence, in a seeded order; the last `n_queries` are held out."""
    from tasks.evaluate.data import load_stackoverflow

    titles = load_stackoverflow(STACKOVERFLOW).texts
    texts = sorted(set(titles) | set(python_doc_sentences()) | set(man_sentences()))
    np.random.default_rng(0).shuffle(texts)
    return texts[:-n_queries], texts[-n_queries:]


def cached_vectors(texts: list[str], cache: Path, chunk: int = 20_000) -> np.ndarray:
    """MiniLM vectors of `texts` (the stage's `encode_texts`), saved per chunk under `cache`: a rerun resumes."""
    import hashlib

    from models.encoders import minilm_path
    from tasks.embed.vectors import encode_texts, load_encoder

    key = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:12]
    cache.mkdir(parents=True, exist_ok=True)
    model, parts = None, []
    started = time.perf_counter()
    for start in range(0, len(texts), chunk):
        path = cache / f"{key}-{start:08d}.npy"
        if not path.exists():
            model = model or load_encoder(str(minilm_path()))
            np.save(path, encode_texts(model, texts[start : start + chunk], 64))
            done = start + chunk
            print(f"  embedded {min(done, len(texts)):,} of {len(texts):,} ({time.perf_counter() - started:.0f} s)")
        parts.append(np.load(path))
    return np.concatenate(parts)


def jittered(matrix: np.ndarray, n: int, sigma: float = 0.02, seed: int = 0) -> np.ndarray:
    """`matrix` and, up to `n` rows, copies of its rows with Gaussian noise (renormalised)."""
    rng = np.random.default_rng(seed)
    extra = matrix[rng.integers(0, len(matrix), n - len(matrix))]
    extra = extra + rng.standard_normal(extra.shape, dtype=np.float32) * sigma
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    return np.concatenate([matrix, extra.astype(np.float32)])


def scale(sizes: list[int], n_queries: int, efs: list[int], cache: Path, build_threads: int) -> list[dict]:
    import torch

    from tasks.embed.index import ExactIndex, HnswConfig, HnswIndex, Vectors

    docs, held_out = real_sentences(n_queries)
    torch.set_num_threads(os.cpu_count() or 1)
    real = cached_vectors(docs, cache)
    queries = cached_vectors(held_out, cache)
    torch.set_num_threads(1)  # one query at a time, as `gur search` serves them
    show(
        f"\n## scale: {len(real):,} real sentence vectors (MiniLM; StackOverflow titles, Python docs, man pages), "
        f"{len(queries)} held-out sentences as queries; HNSW M={HnswConfig().connectivity}, "
        f"efConstruction={HnswConfig().expansion_add}, built with {build_threads} thread(s)"
    )
    show("| vectors | rows | search | build s | ef | p50 ms | p95 ms | recall@10 vs exact | peak RSS MB |")
    show("|---|---|---|---|---|---|---|---|---|")
    figures = []
    for n in sizes:
        matrix = real[:n] if n <= len(real) else jittered(real, n)
        rows = "real" if n <= len(real) else f"{len(real):,} real + jittered copies"
        exact = ExactIndex(Vectors([str(i) for i in range(n)], matrix, "minilm"))
        times, truth = latencies(exact, queries)
        p50, p95 = np.percentile(times, 50), np.percentile(times, 95)
        show(f"| {n:,} | {rows} | exact | - | - | {p50:.1f} | {p95:.1f} | 1 | {peak_mb():.0f} |")
        figures.append({"vectors": n, "rows": rows, "search": "exact", "p50_ms": p50, "p95_ms": p95})
        started = time.perf_counter()
        index = HnswIndex.build(matrix, HnswConfig(), build_threads)
        build_s = time.perf_counter() - started
        for ef in efs:
            index.index.expansion_search = ef
            times, found = latencies(index, queries)
            p50, p95, r = np.percentile(times, 50), np.percentile(times, 95), recall_at(found, truth)
            show(
                f"| {n:,} | {rows} | usearch HNSW | {build_s:.0f} | {ef} | {p50:.2f} | {p95:.2f} | {r:.3f} | "
                f"{peak_mb():.0f} |",
            )
            usearch = dict(search="usearch", ef=ef, build_s=build_s, p50_ms=p50, p95_ms=p95, recall=r)
            figures.append({"vectors": n, "rows": rows, **usearch})
        del index, exact, matrix
    return figures


def main() -> int:
    parser = harness.parser(__doc__, workdir=None)
    parser.add_argument("--parts", nargs="+", default=["throughput", "recall", "latency"])
    parser.add_argument("--titles", type=int, default=2000)
    parser.add_argument("--articles", type=int, default=100)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 200_000, 300_000, 1_000_000])
    parser.add_argument("--hnsw-sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--real-docs", type=int, default=15_000)
    parser.add_argument("--scale-sizes", type=int, nargs="+", default=[10_000, 100_000, 200_000, 400_000, 1_000_000])
    parser.add_argument("--efs", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--cache", default="/tmp/gur-embed-cache", help="where the scale part keeps its vectors")
    parser.add_argument("--build-threads", type=int, default=1, help="HNSW build threads in the scale part")
    parser.add_argument("--faiss", default=None, help="a folder where faiss-cpu was pip-installed with --target")
    args = parser.parse_args()
    import torch

    show(f"torch {torch.__version__}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    figures = {}
    if "throughput" in args.parts:
        figures["throughput"] = throughput(args.titles, args.articles, args.batch)
    if "recall" in args.parts:
        figures["recall"] = recall_real(args.real_docs, args.queries)
    if "scale" in args.parts:
        figures["scale"] = scale(args.scale_sizes, args.queries, args.efs, Path(args.cache), args.build_threads)
    if "latency" in args.parts:
        figures["latency"] = latency(sorted(args.sizes), args.hnsw_sizes, args.queries, args.faiss)
    harness.record(args, f"Embedding and search: {', '.join(args.parts)}", show.lines, figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
