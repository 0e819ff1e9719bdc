"""The gate's suite as files, from the held-out records: a question TSV where they are labelled, BEIR folders
of the label-free tasks where not.

    built = write_suite(folder, kind, held, seed, pairs, cap)   # `_suite.json`'s description: files, counts
    <folder>/holdout.tsv                                     # labelled: id, title, tag (what load_stackoverflow reads)
    <folder>/heldout-title/, heldout-ict/, heldout-pairs/    # label-free: corpus.jsonl, queries.jsonl, qrels/test.tsv

A large held-out side is more than the paired test needs and costs two encodings of every record each night:
the suite is a capped sample of it (`suite_sample`: the records with the smallest seeded hash of their text,
so the sample changes only where a new record hashes lower, and the same on every machine).
"""

from __future__ import annotations

import csv
import hashlib
import shutil
from pathlib import Path

from storage.atomic import atomic_path
from storage.layout import TMP_DIR
from tasks.evaluate.overlap import normalize
from tasks.nightly.config import ICT_TASK, PAIR_TASK, TITLE_TASK
from tasks.nightly.jsonl import write_jsonl
from tasks.nightly.label_free import label_free_tasks, pair_task

HOLDOUT_FILE = "holdout.tsv"
MIN_QUERIES = 10  # fewer and the paired test has nothing to stand on
# held-out records the gate scores at most: enough queries for the paired test to see a small gain (the gate's
# power against the suite's size: the results log, benchmarks/gate_power.py)
SUITE_DOCUMENTS = 2000


def suite_sample(held: list[dict], cap: int, seed: int) -> list[dict]:
    """At most `cap` of the held-out records (0: all), in their order: those whose seeded hash of the normalized
    text is smallest (a bottom-k sample: a new record displaces one only when it hashes lower)."""
    if not cap or len(held) <= cap:
        return held

    def key(i: int) -> tuple[bytes, int]:
        text = f"{seed}\x00suite\x00{normalize(held[i]['text'])}".encode()
        return hashlib.sha256(text).digest(), i

    keep = set(sorted(range(len(held)), key=key)[:cap])
    return [row for i, row in enumerate(held) if i in keep]


def write_suite(folder: Path, kind: str, held: list[dict], seed: int, pairs: bool, cap: int = 0) -> dict:
    """Write the suite the held-out records make (at most `cap` of them: `suite_sample`; `pairs`: a GUR night's
    heldout-pairs too); returns its description (`_suite.json`)."""
    sampled = suite_sample(held, cap, seed)
    described = _write_suite(folder, kind, sampled, seed, pairs)
    return {**described, "sample": {"held_out": len(held), "scored": len(sampled), "cap": cap}}


def _write_suite(folder: Path, kind: str, held: list[dict], seed: int, pairs: bool) -> dict:
    tmp = folder / TMP_DIR
    (folder / HOLDOUT_FILE).unlink(missing_ok=True)
    for name in (TITLE_TASK, ICT_TASK):
        shutil.rmtree(folder / name, ignore_errors=True)
    if kind == "labelled":
        rows = [
            {"id": r["id"] or str(i), "title": r["text"], "tag": r["label"]} for i, r in enumerate(held) if r["label"]
        ]
        _write_tsv(folder / HOLDOUT_FILE, rows, tmp)
        return {
            "kind": kind,
            "stackoverflow": str(folder / HOLDOUT_FILE),
            "beir": [],
            "counts": {"questions": len(rows)},
        }
    tasks = label_free_tasks(held, seed)
    if pairs:
        tasks[PAIR_TASK] = pair_task(held)
    beir = []
    for name in tasks:
        corpus, queries, qrels = tasks[name]
        if len(queries) >= MIN_QUERIES:
            write_beir(folder / name, corpus, queries, qrels, tmp)
            beir.append(str(folder / name))
    counts = {"title_queries": len(tasks[TITLE_TASK][1]), "ict_queries": len(tasks[ICT_TASK][1])}
    if PAIR_TASK in tasks:
        counts["pair_queries"] = len(tasks[PAIR_TASK][1])
    if not any(Path(p).name in (TITLE_TASK, ICT_TASK) for p in beir):
        beir = []  # pairs alone are no suite: the error names the two tasks every corpus can have
    return {"kind": kind, "stackoverflow": "", "beir": beir, "counts": counts}


def _write_tsv(path: Path, rows: list[dict], tmp_dir: Path) -> None:
    with atomic_path(path, tmp_dir=tmp_dir) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, ["id", "title", "tag"], delimiter="\t", lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)


def write_beir(out: Path, corpus: list[dict], queries: list[dict], qrels: list[tuple[str, str]], tmp: Path) -> None:
    """A BEIR-layout folder (`tasks/evaluate/data.py: load_beir` reads it; split `test`)."""
    write_jsonl(out / "corpus.jsonl", corpus, tmp)
    write_jsonl(out / "queries.jsonl", queries, tmp)
    with atomic_path(out / "qrels" / "test.tsv", tmp_dir=tmp) as path:
        lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t1" for q, d in qrels]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
