"""Nights on a growing corpus folder: each night's data stages against a cold build of the same folder.

    .venv/bin/python benchmarks/nightly_growth.py [--workdir WORK] [--nights 5] [--growth 0.05]

The corpus is real text in mixed formats, English and Chinese: the bundled Wikipedia sample's
articles (JSONL), StackOverflow titles grouped by tag into documents (TSV), STS-B en train
sentences grouped into documents (CSV, Parquet, plain-text files, gzip JSONL) and STS-B zh train
sentences, from the shared data; and, when `--text-folder` names one (default: the Python
documentation's reST sources from Debian's `python3-doc`, where installed), every `.txt` file under
it as a document; and `--generated` documents of random words from a 2,000-word vocabulary
(English-like, with shared topic words, so they have pairs), which make the corpus the size of
a real one: a night's fixed costs (Prefect, the catalog) are then no larger a share of it than
they would be for a user. The folder starts with 60% of the documents; each
night adds files holding about `--growth` of the folder's documents, in a new mix of formats.

Per night, in one process (Prefect up once, so its start-up is in no figure): `build-pairs` on the
folder with the night's data root (which holds the earlier nights), then a cold `build-pairs` of
the same folder into an empty root. Figures: wall time, and CPU time of this process plus its
finished children (the stage's spawned workers) from `getrusage`, which load on the machine
inflates far less than wall time. The shards of the night must equal the cold build's byte for
byte. Target: each night costs at most 10% of the cold build's CPU time.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import random
import resource
import shutil
import time
from pathlib import Path

import harness
from harness import shared_data

SENTENCES_PER_DOC = 12
PYTHON_DOCS = Path("/usr/share/doc/python3.11/html/_sources")


def wiki_documents() -> list[dict]:
    from tasks.ingest.readers import ReaderConfig, Record, default_corpus, read_corpus

    items = read_corpus(default_corpus(), ReaderConfig())
    return [{"title": r.title, "text": r.text, "lang": "en"} for r in items if isinstance(r, Record)]


def grouped(sentences: list[str], lang: str, name: str) -> list[dict]:
    """Consecutive sentences as documents (STS-B pairs are neighbours, so a document has pairs to find)."""
    joiner = " " if lang == "en" else ""
    docs = []
    for i in range(0, len(sentences) - SENTENCES_PER_DOC + 1, SENTENCES_PER_DOC):
        part = sentences[i : i + SENTENCES_PER_DOC]
        docs.append({"title": f"{name} {i // SENTENCES_PER_DOC}", "text": joiner.join(part), "lang": lang})
    return docs


def sts_documents(lang: str) -> list[dict]:
    sentences = []
    with open(shared_data("stsb", f"stsb-{lang}-train.csv"), encoding="utf-8", newline="") as f:
        for row in csv.reader(f):
            for s in row[:2]:
                s = s.strip()
                if s and s[-1] not in ".!?。！？":
                    s += "." if lang == "en" else "。"
                sentences.append(s)
    return grouped(sentences, lang, f"stsb-{lang}")


def stackoverflow_documents() -> list[dict]:
    by_tag: dict[str, list[str]] = {}
    with open(shared_data("stackoverflow", "train.tsv"), encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            by_tag.setdefault(row["tag"], []).append(row["title"].strip().rstrip("?") + "?")
    docs = []
    for tag, titles in sorted(by_tag.items()):
        for i in range(0, len(titles) - 20 + 1, 20):
            docs.append({"title": f"{tag} questions {i // 20}", "text": " ".join(titles[i : i + 20]), "lang": "en"})
    return docs


def folder_documents(folder: Path | None) -> list[dict]:
    if folder is None or not folder.is_dir():
        return []
    return [
        {"title": p.stem.removesuffix(".rst"), "text": p.read_text(encoding="utf-8", errors="replace"), "lang": "en"}
        for p in sorted(folder.rglob("*.txt"))
    ]


def generated_documents(n: int, seed: int) -> list[dict]:
    """`n` documents of 8-16 sentences over a 2,000-word vocabulary, each repeating its own topic words."""
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 9))) for _ in range(2000)]
    docs = []
    for i in range(n):
        topic = rng.choices(vocabulary, k=3)
        sentences = []
        for j in range(rng.randint(8, 16)):
            words = rng.choices(vocabulary, k=rng.randint(6, 14))
            if j % 2 == 0:
                words[rng.randint(0, len(words)) : 0] = topic
            sentences.append(" ".join(words).capitalize() + ".")
        docs.append({"title": f"generated {i} {' '.join(topic)}", "text": " ".join(sentences), "lang": "en"})
    return docs


def all_documents(seed: int, text_folder: Path | None = None, generated: int = 0) -> list[dict]:
    docs = wiki_documents() + stackoverflow_documents() + sts_documents("en") + sts_documents("zh")
    docs += folder_documents(text_folder) + generated_documents(generated, seed)
    random.Random(seed).shuffle(docs)
    return docs


FORMATS = ("jsonl", "tsv", "csv", "parquet", "jsonl.gz", "txt")


def write_file(folder: Path, name: str, fmt: str, docs: list[dict]) -> list[str]:
    """Write `docs` as one file of `fmt` (or, for `txt`, one plain-text file per document); the paths."""
    if fmt == "txt":
        sub = folder / name
        sub.mkdir(parents=True, exist_ok=True)
        for i, d in enumerate(docs):
            (sub / f"{i:04d}.txt").write_text(d["text"], encoding="utf-8")
        return [f"{name}/{i:04d}.txt" for i in range(len(docs))]
    path = folder / f"{name}.{fmt}"
    rows = [{"title": d["title"], "text": d["text"]} for d in docs]
    if fmt in ("jsonl", "jsonl.gz"):
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()
        path.write_bytes(gzip.compress(data, mtime=0) if fmt.endswith(".gz") else data)
    elif fmt in ("tsv", "csv"):
        with open(path, "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, delimiter="\t" if fmt == "tsv" else ",", lineterminator="\n")
            writer.writerow(["title", "text"])
            writer.writerows([r["title"], r["text"]] for r in rows)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)
    return [path.name]


def add_files(folder: Path, night: int, docs: list[dict], files: int) -> int:
    """Write `docs` as `files` files of rotating formats; returns how many files were written."""
    written = 0
    per = -(-len(docs) // files)
    for i in range(files):
        part = docs[i * per : (i + 1) * per]
        if part:
            fmt = FORMATS[(night * 3 + i) % len(FORMATS)]
            if fmt == "txt" and len(part) > 200:
                fmt = "jsonl"  # keep plain-text nights to a few dozen files
            written += len(write_file(folder, f"night{night:02d}-{i}", fmt, part))
    return written


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed_build(folder: Path, root: Path, workers: int) -> tuple[dict, float, float]:
    from flows.build_pairs import build_pairs

    wall, cpu = time.perf_counter(), cpu_seconds()
    refs = build_pairs(input_path=str(folder), root=str(root), workers=workers, source_name="corpus")
    return refs, time.perf_counter() - wall, cpu_seconds() - cpu


def shard_digest(root: Path, refs: dict) -> str:
    folder = root / refs["shards"]["path"]
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("part-*.parquet")):
        digest.update(path.relative_to(folder).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()


def main() -> None:
    parser = harness.parser(__doc__, workdir_help="the corpus folder and the roots (emptied first)")
    parser.add_argument("--nights", type=int, default=5)
    parser.add_argument("--growth", type=float, default=0.05, help="new documents a night, as a share of the folder")
    parser.add_argument("--start", type=float, default=0.6, help="share of the documents the folder starts with")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--generated", type=int, default=20_000, help="generated documents added to the real ones")
    parser.add_argument(
        "--text-folder",
        default=str(PYTHON_DOCS),
        help="every .txt file under it is a document too (default: %(default)s, from `apt-get install python3-doc`;"
        " '' for none)",
    )
    args = parser.parse_args()
    work = harness.workdir(args)
    for old in (work / "corpus", work / "nightly", *work.glob("cold-*")):
        shutil.rmtree(old, ignore_errors=True)
    folder, root = work / "corpus", work / "nightly"
    folder.mkdir(parents=True)

    from prefect.testing.utilities import prefect_test_harness

    docs = all_documents(args.seed, Path(args.text_folder) if args.text_folder else None, args.generated)
    start = int(len(docs) * args.start)
    zh = sum(d["lang"] == "zh" for d in docs)
    show = harness.Lines()
    show(f"{len(docs)} documents available ({zh} zh); the folder starts with {start}")
    add_files(folder, 0, docs[:start], files=6)
    used = start
    rows = []
    with prefect_test_harness(server_startup_timeout=120):
        refs, wall, cpu = timed_build(folder, root, args.workers)
        show(f"night 0 (first build): {used} documents, {wall:.1f} s wall, {cpu:.1f} s CPU")
        first = {"documents": used, "wall_s": wall, "cpu_s": cpu}
        for night in range(1, args.nights + 1):
            new = max(1, round(used * args.growth))
            n_files = add_files(folder, night, docs[used : used + new], files=2)
            used += new
            refs, wall, cpu = timed_build(folder, root, args.workers)
            cold_root = work / f"cold-{night}"
            cold, cold_wall, cold_cpu = timed_build(folder, cold_root, args.workers)
            same = shard_digest(root, refs) == shard_digest(cold_root, cold)
            rows.append((night, new, n_files, used, wall, cpu, cold_wall, cold_cpu, same))
            print(
                f"night {night}: +{new} documents in {n_files} files ({used} in all): night {wall:.1f} s wall / "
                f"{cpu:.1f} s CPU, cold {cold_wall:.1f} s / {cold_cpu:.1f} s CPU = {cpu / cold_cpu:.1%} of the cold "
                f"CPU; shards {'byte-identical' if same else 'DIFFER'}",
                flush=True,
            )  # progress: the table below holds the same
            shutil.rmtree(cold_root)
    show(
        "| night | new documents | new files | documents | night wall s | night CPU s | cold wall s | cold CPU s "
        "| night / cold CPU | shards = cold |"
    )
    show("|---|---|---|---|---|---|---|---|---|---|")
    for night, new, n_files, used, wall, cpu, cold_wall, cold_cpu, same in rows:
        show(
            f"| {night} | {new} | {n_files} | {used} | {wall:.1f} | {cpu:.1f} | {cold_wall:.1f} | {cold_cpu:.1f} "
            f"| {cpu / cold_cpu:.1%} | {'yes' if same else 'NO'} |"
        )
    worst = max(cpu / cold_cpu for *_, cpu, _, cold_cpu, _ in rows)
    show(
        f"worst night: {worst:.1%} of the cold build's CPU (target <= 10%); all byte-identical: "
        f"{all(r[-1] for r in rows)}"
    )
    names = ("night", "new", "files", "documents", "wall_s", "cpu_s", "cold_wall_s", "cold_cpu_s", "same")
    figures = {"first": first, "nights": [dict(zip(names, row, strict=True)) for row in rows], "worst": worst}
    harness.record(args, f"{args.nights} nights on a growing corpus folder against cold builds", show.lines, figures)


if __name__ == "__main__":
    main()
