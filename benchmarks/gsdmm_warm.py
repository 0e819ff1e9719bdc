"""GSDMM on a grown corpus: a warm start from the previous night's fit against a cold fit.

    .venv/bin/python benchmarks/gsdmm_warm.py [--start 0.8] [--nights 2] [--k 30]

The 16,000 StackOverflow titles (the shared data), shuffled with a seed: night 0 fits the first
`--start` share cold (30 sweeps); each later night adds an equal share of the rest and fits the
grown corpus twice: cold (30 sweeps, as the stage does by default) and warm (`warm_iters` sweeps,
each title seen before starting in its earlier topic). Per night: NMI of the topics against the
20 tags, populated topics, sweeps and fit seconds (this process's CPU time), documents moved in
each sweep (convergence), and how alike the keyword sequences are: the share of titles whose
keywords are the same, warm vs cold, next to cold vs a cold fit with another seed (how much two
equally good cold fits differ anyway).
"""

from __future__ import annotations

import csv
import dataclasses
import random
import time

import harness
from harness import shared_data


def titles(seed: int) -> list[tuple[str, str]]:
    with open(shared_data("stackoverflow", "train.tsv"), encoding="utf-8", newline="") as f:
        rows = [(r["title"], r["tag"]) for r in csv.DictReader(f, delimiter="\t")]
    random.Random(seed).shuffle(rows)
    return rows


def fit(rows: list[tuple[str, str]], config, prior=None):
    import pyarrow as pa

    from tasks.keywords.filter import mine_keywords_table

    table = pa.table(
        {
            "doc_id": [f"q{hash_title(t)}" for t, _ in rows],
            "sent_id": pa.array([0] * len(rows), pa.int32()),
            "text": [t for t, _ in rows],
        }
    )
    started = time.process_time()
    keywords, _, stats, _ = mine_keywords_table(table, config, prior)
    return keywords, stats, time.process_time() - started


def hash_title(title: str) -> str:
    import hashlib

    return hashlib.blake2b(title.encode(), digest_size=8).hexdigest()


def nmi(keywords, tags: list[str]) -> float:
    from tasks.keywords.coherence import normalized_mutual_info

    topics = keywords.column("topic").to_pylist()
    kept = [(t, g) for t, g in zip(topics, tags, strict=True) if t is not None]
    return normalized_mutual_info([g for _, g in kept], [t for t, _ in kept])


def same_keywords(a, b) -> float:
    x, y = a.column("keywords").to_pylist(), b.column("keywords").to_pylist()
    return sum(p == q for p, q in zip(x, y, strict=True)) / max(len(x), 1)


def main() -> None:
    from tasks.keywords.filter import KeywordsConfig

    parser = harness.parser(__doc__, workdir=None)
    parser.add_argument("--start", type=float, default=0.8, help="share of the titles night 0 fits")
    parser.add_argument("--nights", type=int, default=2)
    parser.add_argument("--k", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = titles(args.seed)
    cold = KeywordsConfig(k=args.k, seed=args.seed)
    warm = dataclasses.replace(cold, warm_start=True)
    other_seed = dataclasses.replace(cold, seed=args.seed + 1)
    n = int(len(rows) * args.start)
    step = (len(rows) - n) // max(args.nights, 1)
    keywords, stats, cpu = fit(rows[:n], cold)
    first = {"titles": n, "nmi": nmi(keywords, [g for _, g in rows[:n]]), "cpu_s": cpu}
    show = harness.Lines()
    show(f"night 0: {n} titles, cold fit: NMI {first['nmi']:.3f}, {cpu:.1f} s CPU")
    previous = keywords
    header = "| night | titles | fit | sweeps | fit CPU s | NMI | topics | same keywords as cold | moved first/last |"
    table = [header]
    table.append("|---|---|---|---|---|---|---|---|---|")
    nights = [{"night": 0, "fit": "cold", **first}]
    for night in range(1, args.nights + 1):
        n = n + step if night < args.nights else len(rows)
        part, tags = rows[:n], [g for _, g in rows[:n]]
        prior = {
            (d, s): t
            for d, s, t in zip(*(previous.column(c).to_pylist() for c in ("doc_id", "sent_id", "topic")), strict=True)
            if t is not None
        }
        results = {
            "cold": fit(part, cold),
            "warm": fit(part, warm, prior),
            "cold, other seed": fit(part, other_seed),
        }
        reference = results["cold"][0]
        for name, (kw, st, cpu) in results.items():
            moved, same, score = st["moved_per_sweep"], same_keywords(kw, reference), nmi(kw, tags)
            row = dict(night=night, titles=n, fit=name, sweeps=st["sweeps"], cpu_s=cpu, nmi=score, same_keywords=same)
            nights.append({**row, "topics": st["populated_topics"]})
            table.append(
                f"| {night} | {n} | {name} | {st['sweeps']} | {cpu:.1f} | {score:.3f} | "
                f"{st['populated_topics']} | {same:.1%} | {moved[0]} / {moved[-1]} |"
            )
        previous = results["warm"][0]
        print(f"night {night}: {n} titles done", flush=True)
    show(*table)
    title = f"GSDMM warm start on a grown corpus ({args.nights} nights, K={args.k})"
    harness.record(args, title, show.lines, {"nights": nights})


if __name__ == "__main__":
    main()
