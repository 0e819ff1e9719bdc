"""Benchmark GSDMM: our numba and numpy backends against a plain-Python reference of the same sampler.

    .venv/bin/python benchmarks/gsdmm.py                      # synthetic + StackOverflow fit timing
    .venv/bin/python benchmarks/gsdmm.py --so-report          # + K sweep, NMI vs tags, keyword figures
    .venv/bin/python benchmarks/gsdmm.py --skip-python        # without the ~10-20 s pure-Python run

Synthetic corpus (the issue's setting): 5,000 texts of 8 distinct words from a 5,000-word vocabulary, drawn
from 30 Zipf topics; K = 30, 10 iterations, alpha = beta = 0.1. Anchors measured on a 2-core machine: the
`gsdmm` package 19.5 s per fit, the authors' Java 0.18 s. Goal: <= 0.25 s per fit after compilation, and the
16,000 StackOverflow titles (K = 30, 30 iterations) in under 2 s.

Numba compile time is measured cold, with a fresh NUMBA_CACHE_DIR, unless --numba-cache is given.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import tempfile
import time
from pathlib import Path

import harness
from harness import shared_data

show = harness.Lines()  # the figures each part prints, for the entry


def synthetic_corpus(
    n_docs: int, vocab: int, n_topics: int, length: int, seed: int
) -> tuple[list[list[str]], list[int]]:
    """Each topic is a Zipf(1.1) distribution over its own random permutation of the vocabulary; a text
    draws `length` distinct words from its topic (Gumbel top-k, i.e. sampling without replacement)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    weights = np.log(1.0 / np.arange(1, vocab + 1) ** 1.1)
    perms = np.stack([rng.permutation(vocab) for _ in range(n_topics)])
    truth = rng.integers(0, n_topics, size=n_docs)
    docs = []
    for t in truth:
        keys = weights + rng.gumbel(size=vocab)
        docs.append([f"w{perms[t, i]}" for i in np.argpartition(-keys, length)[:length]])
    return docs, truth.tolist()


def python_reference(
    docs: list[list[str]],
    K: int,
    alpha: float,
    beta: float,
    n_iters: int,
    seed: int,  # noqa: N803
) -> list[int]:
    """The sampler in plain Python, rwalk/gsdmm style (dict counts, a math.log per term, Eq. 3), drawing from
    the same random stream as `MovieGroupProcess` so that the labels can be compared."""
    import numpy as np

    from tasks.keywords.gsdmm import _BLOCK

    docs = [list(dict.fromkeys(doc)) for doc in docs]
    V = len({w for doc in docs for w in doc})  # noqa: N806
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, K, size=len(docs)).tolist()
    m = [0] * K
    n = [0] * K
    nw: list[dict[str, int]] = [{} for _ in range(K)]
    for doc, z in zip(docs, labels, strict=True):
        m[z] += 1
        n[z] += len(doc)
        for w in doc:
            nw[z][w] = nw[z].get(w, 0) + 1
    log = math.log
    for _ in range(n_iters):
        for start in range(0, len(docs), _BLOCK):
            stop = min(start + _BLOCK, len(docs))
            with np.errstate(divide="ignore"):
                gumbel = (-np.log(-np.log(rng.random((stop - start, K))))).tolist()
            for d in range(start, stop):
                doc, z = docs[d], labels[d]
                m[z] -= 1
                n[z] -= len(doc)
                for w in doc:
                    nw[z][w] -= 1
                best, best_value = 0, -math.inf
                for k in range(K):
                    lp = log(m[k] + alpha)
                    for i in range(len(doc)):
                        lp -= log(n[k] + V * beta + i)
                    counts = nw[k]
                    for w in doc:
                        lp += log(counts.get(w, 0) + beta)
                    value = lp + gumbel[d - start][k]
                    if value > best_value:
                        best, best_value = k, value
                labels[d] = best
                m[best] += 1
                n[best] += len(doc)
                for w in doc:
                    nw[best][w] = nw[best].get(w, 0) + 1
    return labels


def timed(fn, repeats: int) -> tuple[float, object]:
    best, result = math.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def read_stackoverflow(path: Path) -> tuple[list[str], list[str]]:
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))  # quoted fields use doubled quotes ("" inside)
    return [r["title"] for r in rows], [r["tag"] for r in rows]


def bench_synthetic(args: argparse.Namespace) -> dict:
    from tasks.keywords.coherence import normalized_mutual_info
    from tasks.keywords.gsdmm import MovieGroupProcess

    docs, truth = synthetic_corpus(args.docs, args.vocab, args.topics, args.length, seed=0)
    used = len({w for d in docs for w in d})
    show(
        f"synthetic: {len(docs)} texts x {args.length} words, vocabulary {args.vocab} ({used} used), "
        f"{args.topics} topics; K={args.k}, {args.iters} iterations, alpha=beta=0.1"
    )

    def fit(backend: str, repeated: bool = False):
        model = MovieGroupProcess(K=args.k, n_iters=args.iters, random_state=0, backend=backend,
                                  repeated_tokens=repeated)  # fmt: skip
        return model.fit(docs)

    t0 = time.perf_counter()
    MovieGroupProcess(K=3, n_iters=1).fit([["a", "b"], ["b", "c"]])
    compile_s = time.perf_counter() - t0
    numba_s, labels = timed(lambda: fit("numba"), args.repeats)
    numba_eq4_s, _ = timed(lambda: fit("numba", repeated=True), args.repeats)
    numpy_s, labels_np = timed(lambda: fit("numpy"), 1)
    cache = "cache load" if args.numba_cache else "cold compile"
    nmi = normalized_mutual_info(truth, labels)
    show(f"  numba compile ({cache}, once per process): {compile_s:.2f} s")
    show(f"  numba fit, best of {args.repeats}:   {numba_s:.3f} s   (Eq. 4 option: {numba_eq4_s:.3f} s)")
    show(f"  numpy fit:                  {numpy_s:.3f} s   labels identical to numba: {labels_np == labels}")
    show(f"  NMI vs generating topics:   {nmi:.3f}")
    figures = {"compile_s": compile_s, "numba_s": numba_s, "numba_eq4_s": numba_eq4_s, "numpy_s": numpy_s, "nmi": nmi}
    if not args.skip_python:
        python_s, labels_py = timed(lambda: python_reference(docs, args.k, 0.1, 0.1, args.iters, 0), 1)
        show(f"  plain-Python reference:     {python_s:.2f} s   labels identical to numba: {labels_py == labels}")
        show(f"  speed-up numba vs Python:   {python_s / numba_s:.0f}x   numpy vs Python: {python_s / numpy_s:.1f}x")
        figures["python_s"] = python_s
    show(
        f"  vs anchors: gsdmm package 19.5 s -> {19.5 / numba_s:.0f}x; authors' Java 0.18 s -> "
        f"{0.18 / numba_s:.2f}x; goal <= 0.25 s: {'met' if numba_s <= 0.25 else 'NOT met'}"
    )
    return figures


def bench_stackoverflow(args: argparse.Namespace) -> dict:
    from tasks.keywords.coherence import normalized_mutual_info
    from tasks.keywords.filter import tokenize
    from tasks.keywords.gsdmm import MovieGroupProcess

    titles, tags = read_stackoverflow(args.stackoverflow)
    t0 = time.perf_counter()
    docs = [[t.norm for t in tokenize(title)] for title in titles]
    tokenize_s = time.perf_counter() - t0
    vocab = len({w for d in docs for w in d})
    mean_len = sum(len(dict.fromkeys(d)) for d in docs) / len(docs)
    show(
        f"StackOverflow: {len(titles)} titles, V={vocab}, {mean_len:.2f} distinct tokens/title, "
        f"tokenized in {tokenize_s:.2f} s (first call includes loading gensim's stopword list)"
    )

    def fit() -> MovieGroupProcess:
        model = MovieGroupProcess(K=30, n_iters=30, random_state=0)
        model.fit(docs)
        return model

    fit_s, model = timed(fit, args.repeats)
    populated = sum(m > 0 for m in model.cluster_doc_count)
    nmi = normalized_mutual_info(tags, model.labels_.tolist())
    show(
        f"  K=30, 30 iterations, numba, best of {args.repeats}: {fit_s:.3f} s "
        f"(goal < 2 s: {'met' if fit_s < 2 else 'NOT met'}); populated {populated}; NMI vs tags {nmi:.3f}"
    )
    return {"titles": len(titles), "vocabulary": vocab, "tokenize_s": tokenize_s, "fit_s": fit_s, "nmi": nmi}


def so_report(args: argparse.Namespace) -> dict:
    import numpy as np
    import pyarrow as pa

    from tasks.keywords.coherence import normalized_mutual_info, plot_sweep, summarize_sweep, sweep_k
    from tasks.keywords.filter import KeywordsConfig, mine_keywords_table, tokenize
    from tasks.keywords.gsdmm import MovieGroupProcess

    titles, tags = read_stackoverflow(args.stackoverflow)
    docs = [[t.norm for t in tokenize(title)] for title in titles]
    ks = [int(k) for k in args.ks.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    t0 = time.perf_counter()
    rows = sweep_k(docs, None, ks, seeds, n_iters=30)
    sweep_s = time.perf_counter() - t0
    summary, best_k = summarize_sweep(rows, "npmi")
    show(f"K sweep on StackOverflow ({len(ks)} K x {len(seeds)} seeds, 30 iterations, {sweep_s:.1f} s):")
    show("     K  populated(min-max)   NPMI mean+-sd          UMass mean   C_V mean   NMI vs tags (mean, min-max)")
    for entry in summary:
        k = entry["k"]
        nmis = []
        for seed in seeds:
            model = MovieGroupProcess(K=k, n_iters=30, random_state=seed)
            nmis.append(normalized_mutual_info(tags, model.fit(docs)))
        entry["nmi_mean"] = float(np.mean(nmis))
        show(
            f"  {k:4d}  {entry['populated_mean']:5.1f} ({entry['populated_min']:.0f}-{entry['populated_max']:.0f})"
            f"       {entry['npmi_mean']:+.4f} +- {entry['npmi_std']:.4f}     {entry['umass_mean']:7.3f}"
            f"     {entry['c_v_mean']:.4f}     {np.mean(nmis):.3f} ({min(nmis):.3f}-{max(nmis):.3f})"
        )
    show(f"  best K by mean NPMI: {best_k}")
    if args.plot:
        print(f"  plot: {plot_sweep(rows, args.plot)}")

    table = pa.table(
        {"doc_id": [str(i) for i in range(len(titles))], "sent_id": pa.array([0] * len(titles), pa.int32()),
         "text": titles}
    )  # fmt: skip
    configs = {
        "paper t=100 (absolute)": KeywordsConfig(k=30, threshold="absolute", t=100),
        "default t_z=max(2, 0.1 m_z)": KeywordsConfig(k=30),
        f"default, swept K={best_k}": KeywordsConfig(k=best_k),
    }
    show("GSDMM-Filter on the 16,000 titles (seed 0, 30 iterations; 'empty' = nothing passes the threshold,")
    show("those rows get the lift fallback):")
    show("  setting                        K  pop   NMI    kw/question  empty(before fallback)  exactly 1   >=2")
    examples, filters = [], {}
    for name, config in configs.items():
        keywords, topics, stats, _ = mine_keywords_table(table, config)
        topic = keywords.column("topic").to_pylist()
        nmi = normalized_mutual_info(tags, topic)
        n_kw = np.array([len(k) for k in keywords.column("keywords").to_pylist()])
        fallback = keywords.column("fallback").to_pylist()
        before = np.where(fallback, 0, n_kw)  # keywords that passed the threshold
        filters[name] = {"k": config.k, "nmi": nmi, "keywords_per_question": float(n_kw.mean()), **stats}
        show(
            f"  {name:29s} {config.k:3d}  {stats['populated_topics']:3d}  {nmi:.3f}   {n_kw.mean():.2f}"
            f" ({before.mean():.2f} w/o fb)   {stats['threshold_empty'] / len(titles):6.1%}"
            f"               {np.mean(n_kw == 1):6.1%}   {np.mean(n_kw >= 2):5.1%}"
        )
        examples.append((name, keywords.slice(0, 8).to_pylist()))
    for name, rows in examples[:2]:
        show(f"  examples ({name}):")
        for row in rows:
            show(f"    {row['text']!r} -> {row['keywords']}{' (fallback)' if row['fallback'] else ''}")
    return {"sweep": summary, "best_k": best_k, "filters": filters}


def main() -> None:
    parser = harness.parser(__doc__, workdir=None)
    parser.add_argument("--docs", type=int, default=5000)
    parser.add_argument("--vocab", type=int, default=5000)
    parser.add_argument("--topics", type=int, default=30)
    parser.add_argument("--length", type=int, default=8)
    parser.add_argument("--k", type=int, default=30)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-python", action="store_true", help="skip the plain-Python reference")
    parser.add_argument("--numba-cache", action="store_true", help="reuse numba's on-disk cache")
    parser.add_argument(
        "--stackoverflow", type=Path, default=shared_data("stackoverflow", "train.tsv"), help="train.tsv"
    )
    parser.add_argument("--so-report", action="store_true", help="K sweep, NMI and keyword figures on StackOverflow")
    parser.add_argument("--ks", default="10,20,30,40,50")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--plot", type=Path, default=None, help="write the coherence-vs-K PNG here")
    args = parser.parse_args()
    if not args.numba_cache:
        os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="numba-bench-")
    figures = {"synthetic": bench_synthetic(args)}
    if args.stackoverflow.exists():
        figures["stackoverflow"] = bench_stackoverflow(args)
        if args.so_report:
            figures["report"] = so_report(args)
    else:
        show(f"{args.stackoverflow} not found: StackOverflow figures skipped")
    harness.record(args, "GSDMM's backends against the plain-Python sampler", show.lines, figures)


if __name__ == "__main__":
    main()
