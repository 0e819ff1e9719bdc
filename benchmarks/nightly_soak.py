"""Sixty nights on one data root: retention keeps it bounded, and a night's data stages cost the same.

    .venv/bin/python benchmarks/nightly_soak.py [--nights 60] [--start 2000] [--per-night 20] [--workdir DIR]
        [--history-nights 5]

A corpus folder of real StackOverflow titles with their tags (from the shared data), `--start` titles in
one TSV, grows by `--per-night` titles a night (1%), each night's file in the next of five formats (JSONL,
gzip JSONL, Parquet, TSV, bz2 CSV). Each night, in this process (Prefect up once): `build-pairs` on the
folder (what a GUR night builds: the shuffle's full copy per night is what retention must bound), then
`nightly-retrain` with a TFCSG candidate from a tiny random BERT (`--steps` steps: the night's every stage
runs, in minutes not hours), the gate on the labelled held-out share, and `[retention]` at its defaults,
applied at the end of the night.

Per night: data-stage CPU s (this process, the held-out split, keywords and build-pairs), training CPU s
(the trainer subprocess), the decision, the root's size (hard links once), what the night's gc freed, and
the root's size had nothing been deleted (root + everything freed so far). At the end: a cold build of the
final folder (one build-pairs, one night) in an empty root, `gur verify` over the soaked root, and the
targets: root after the last night at most 2x what its kept builds and models occupy (the outputs retention
keeps for the newest builds, their inputs and derived embeddings, the held-out split, and the runs that keep
their weights: each byte-identical to what a cold build of the same folder writes); the last night's data
CPU at most 1.25x night 10's (and, as one night's CPU varies by a third on a shared VM, the same ratio on the
medians of the five nights around each); no failed night. The root against one cold night is printed too.

Then `--history-nights` more nights on both the soaked root and the cold one, the same folder for both: a
night's data CPU over the soak's history against over one night's. Night 60 reads a folder 45% larger than
night 10's, which a cold build reads too; this ratio is what the history itself costs.
"""

from __future__ import annotations

import argparse
import bz2
import csv
import gzip
import io
import json
import math
import resource
from pathlib import Path

import harness
from harness import shared_data

STACKOVERFLOW = shared_data("stackoverflow", "train.tsv")
FORMATS = ("jsonl", "jsonl.gz", "parquet", "tsv", "csv.bz2")


def write_file(path: Path, rows: list[dict]) -> None:
    """`rows` (id, title, tag) in the format the name says."""
    if path.name.endswith(".parquet"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)
        return
    if ".jsonl" in path.name:
        data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    else:
        buffer = io.StringIO(newline="")
        writer = csv.DictWriter(buffer, ["id", "title", "tag"], delimiter="\t" if ".tsv" in path.name else ",")
        writer.writeheader()
        writer.writerows(rows)
        data = buffer.getvalue().encode()
    path.write_bytes(
        gzip.compress(data, mtime=0) if path.suffix == ".gz" else bz2.compress(data) if path.suffix == ".bz2" else data
    )


def add_night(corpus: Path, rows: list[dict], n: int, start: int, per_night: int) -> int:
    """Night `n`'s file in `corpus`: the `per_night` titles after the first `start` and the nights before, in the
    next of `FORMATS`. Returns the titles the folder then holds."""
    first = start + (n - 1) * per_night
    write_file(corpus / f"night-{n:03d}.{FORMATS[(n - 1) % len(FORMATS)]}", rows[first : first + per_night])
    return first + per_night


def config_text(corpus: Path, model: Path, steps: int) -> str:
    options = "{eval_every = 0, threads = 1, lr = 1e-3, ckpt_every = 1000}"
    return (
        f'[corpus]\npath = "{corpus}"\ntext_field = "title"\ntitle_field = ""\n'
        f'[train]\nmethod = "tfcsg"\ninit_from = "{model}"\npreset = "cpu"\nsteps = {steps}\noptions = {options}\n'
        "[keywords]\nk = 20\n[evaluate]\nstsb = []\n[gate]\nguards = {}\n"
    )


def cpu() -> tuple[float, float]:
    """(this process, its finished children) CPU seconds."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def night(corpus: Path, root: Path, config: Path) -> dict:
    """One night: build-pairs on the folder, then nightly-retrain; CPU split between data stages and training."""
    import flows.nightly_retrain as nightly
    from flows.build_pairs import build_pairs

    spent = {"data": 0.0, "train": 0.0}

    def timed(kind, fn):
        def run(*args, **kwargs):
            (own, kids) = cpu()
            try:
                return fn(*args, **kwargs)
            finally:
                own2, kids2 = cpu()
                spent[kind] += (own2 - own) + (kids2 - kids)

        return run

    real = (nightly.open_night, nightly.data_stages, nightly.train_candidate)  # open_night: the held-out split
    nightly.open_night, nightly.data_stages = timed("data", real[0]), timed("data", real[1])
    nightly.train_candidate = timed("train", real[2])  # timing only: the same functions run
    try:
        timed("data", build_pairs)(
            input_path=str(corpus), text_field="title", title_field="", root=str(root), workers=1
        )
        row = nightly.nightly_retrain(config_path=str(config), root=str(root))
    finally:
        nightly.open_night, nightly.data_stages, nightly.train_candidate = real
    return {**spent, "decision": row["decision"], "freed": row.get("gc_freed_bytes") or 0}


def around(table: list[dict], night: int) -> tuple[int, int, float]:
    """(first, last, median data CPU s) of the five nights centred on `night`, clipped to the run."""
    import statistics

    first = max(1, min(night - 2, len(table) - 4))
    rows = [r for r in table if first <= r["night"] <= first + 4 and not str(r["decision"]).startswith("failed")]
    return first, first + 4, statistics.median(r["data"] for r in rows) if rows else float("nan")


def kept_builds_and_models(root: Path) -> list[Path]:
    """The outputs retention keeps as builds and models (not records): data stages, embeddings, the held-out
    split they read, and training runs that still hold their weights."""
    from tasks.retention.plan import DATA_STAGES, DERIVED, RetentionConfig, plan

    kept = plan(root, RetentionConfig()).keep
    stages = (*DATA_STAGES, *DERIVED, "holdout")
    return [
        root / path
        for path in kept
        if path.split("/")[0] in stages or (path.startswith("train/") and (root / path / "export").is_dir())
    ]


def history_nights(args: argparse.Namespace, rows: list[dict], corpus: Path, roots: dict, config: Path) -> list:
    """The soak's next nights on each root of `roots` (the soaked one, and the cold build's beside it), one folder
    for both: a night's data CPU over the soak's history against over one night's. Which root goes first
    alternates, so neither always reads the night's new file first."""
    history = []
    for j in range(args.history_nights):
        n = args.nights + 1 + j
        add_night(corpus, rows, n, args.start, args.per_night)
        row = {"night": n}
        for name in sorted(roots, reverse=j % 2 == 1):
            try:
                row[name] = night(corpus, roots[name], config)["data"]
            except Exception as exc:  # a failed night is a figure here too
                row[name] = float("nan")
                print(f"night {n} on the {name} root: failed: {exc}", flush=True)
        print(f"night {n}: data CPU s on the soaked root {row['soaked']:.2f}, on the fresh one {row['fresh']:.2f}")
        history.append(row)
    return history


def main() -> None:
    help_work = "the corpus, the soaked root and the cold one (name one to keep them for nightly_stage_cpu.py)"
    parser = harness.parser(__doc__, workdir_help=help_work)
    parser.add_argument("--nights", type=int, default=60)
    parser.add_argument("--start", type=int, default=2000)
    parser.add_argument("--per-night", type=int, default=20)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument(
        "--history-nights",
        type=int,
        default=5,
        help="after the soak, this many more nights on the soaked root and on the cold root beside it, the same "
        "folder for both, alternating: what the soak's history costs a night (0: skip)",
    )
    args = parser.parse_args()

    from prefect.testing.utilities import prefect_test_harness

    from samples.tiny_bert import tiny_bert
    from storage.stage_output import verify_outputs
    from tasks.retention.sweep import size_of

    with open(STACKOVERFLOW, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    rows = rows[: args.start + (args.nights + args.history_nights) * args.per_night]
    work = harness.workdir(args)
    corpus, root = work / "corpus", work / "data"
    corpus.mkdir(parents=True, exist_ok=True)
    write_file(corpus / "start.tsv", rows[: args.start])
    model = work / "tiny-bert"
    if not model.exists():
        tiny_bert(model, [r["title"] for r in rows])
    config = work / "nightly.toml"
    config.write_text(config_text(corpus, model, args.steps), encoding="utf-8")
    table, freed_total, failed = [], 0, 0
    show = harness.Lines()
    show("| night | titles | data CPU s | train CPU s | decision | root MB | gc freed MB | without retention MB |")
    show("|---|---|---|---|---|---|---|---|")
    with prefect_test_harness(server_startup_timeout=120):
        for n in range(1, args.nights + 1):
            titles = add_night(corpus, rows, n, args.start, args.per_night)
            try:
                result = night(corpus, root, config)
            except Exception as exc:  # a failed night is a figure, not the end of the soak
                failed += 1
                result = {"data": 0.0, "train": 0.0, "decision": f"failed: {exc}"[:60], "freed": 0}
            freed_total += result["freed"]
            size = size_of([root])
            table.append({"night": n, **result, "root": size, "without": size + freed_total})
            show(
                f"| {n} | {titles} | {result['data']:.1f} | {result['train']:.1f} | "
                f"{result['decision']} | {size / 1e6:.1f} | {result['freed'] / 1e6:.1f} | "
                f"{(size + freed_total) / 1e6:.1f} |"
            )
        damaged = [r for r in verify_outputs(root) if r["status"] == "damaged"]
        kept = size_of(kept_builds_and_models(root))
        cold_root = work / "cold"
        night(corpus, cold_root, config)
        cold = size_of([cold_root])
        history = history_nights(args, rows, corpus, {"soaked": root, "fresh": cold_root}, config)
    last, tenth = table[-1], table[min(9, len(table) - 1)]
    show(
        f"root after night {last['night']}: {last['root'] / 1e6:.1f} MB; its kept builds and models: "
        f"{kept / 1e6:.1f} MB ({last['root'] / kept:.2f}x; target 2x); one cold night of the same folder: "
        f"{cold / 1e6:.1f} MB ({last['root'] / cold:.2f}x); without retention {last['without'] / 1e6:.1f} MB"
    )
    show(
        f"data-stage CPU, night {last['night']} / night {tenth['night']}: {last['data'] / tenth['data']:.2f}x "
        "(target 1.25x)"
    )
    # One night's CPU varies by a third from night to night on a shared VM: the medians of the five nights
    # around each end say the same with less noise.
    early, late = around(table, tenth["night"]), around(table, last["night"])
    show(
        f"data-stage CPU, median of nights {early[0]}-{early[1]}: {early[2]:.2f} s, of nights {late[0]}-{late[1]}: "
        f"{late[2]:.2f} s ({late[2] / early[2]:.2f}x)"
    )
    roots = ("soaked", "fresh")
    failed += sum(math.isnan(h[name]) for h in history for name in roots)  # a failed history night is NaN
    ran = [h for h in history if not any(math.isnan(h[name]) for name in roots)]
    if ran:
        import statistics

        soaked = statistics.median(h["soaked"] for h in ran)
        fresh = statistics.median(h["fresh"] for h in ran)
        show(
            f"history's cost: data-stage CPU of nights {ran[0]['night']}-{ran[-1]['night']}, medians, on the "
            f"soaked root {soaked:.2f} s, on a root with one cold night of the same folder {fresh:.2f} s "
            f"({soaked / fresh:.2f}x)"
        )
    show(f"failed nights: {failed}; gur verify after the last night: {len(damaged)} damaged outputs")
    summary = {"nights": table, "cold": cold, "kept": kept, "history": history, "failed": failed}
    (work / "soak.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    title = f"{args.nights} nights on one data root with retention, {args.per_night} new titles a night"
    harness.record(args, title, show.lines, summary)


if __name__ == "__main__":
    main()
