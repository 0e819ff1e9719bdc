"""Where a night's data-stage CPU goes, per stage, on a copy of a soaked workdir: a fresh process, one warm night.

    .venv/bin/python benchmarks/nightly_stage_cpu.py WORKDIR [--nights 5] [--copy DIR | --in-place | --fresh-root]

Copies the workdir (`benchmarks/nightly_soak.py --workdir`; the original is never touched) or, with
`--in-place`, extends it (its records name its own paths, so its nights are exactly the soak's next), adds the next
nights' files as the soak would, and runs its nights in this process (Prefect up once): the first as a warm-up
(imports, first calls), then `--nights` measured. Per night it prints the soak's data CPU and the CPU seconds
inside each stage (`run_stage` by stage name, `update_catalog`; training and evaluation stages too, for
scale). Run it on a 10-night and a 60-night workdir to see which stage grows with the root, in the way a
scheduled night runs: each night its own process (a served deployment starts one per flow run), here with
its start-up left out by the warm night.

`--fresh-root` separates what the root's history costs from what the corpus costs: the copy takes only the
workdir's corpus folder, initial model and config, with an empty data root. Its warm night is a cold build of
the same folder, and its measured nights add the same files the workdir's next nights would, so run it before
`--in-place` on the same workdir: the two measure the same folder, one over the soak's history and one over a
night's. Their ratio is the history's cost; a 10-night workdir against a 60-night one is the corpus's too.
"""

from __future__ import annotations

import argparse
import collections
import csv
import shutil
import statistics
from pathlib import Path

import harness
import nightly_soak as soak


def instrument(spent: collections.Counter) -> None:
    """Add each stage's CPU (this process and its finished children) to `spent`, by stage name."""
    import flows.build_pairs
    import flows.embed
    import flows.evaluate
    import flows.mine_keywords
    import flows.nightly_retrain
    import flows.train

    def wrap(module, name: str, by_stage: bool) -> None:
        real = getattr(module, name)

        def run(*args, **kwargs):
            key = getattr(args[0], "name", "?") if by_stage else name
            before = sum(soak.cpu())
            try:
                return real(*args, **kwargs)
            finally:
                spent[key] += sum(soak.cpu()) - before

        setattr(module, name, run)

    for module in (flows.build_pairs, flows.mine_keywords, flows.evaluate, flows.embed, flows.train):
        wrap(module, "run_stage", by_stage=True)
    for module in (flows.build_pairs, flows.mine_keywords, flows.embed, flows.nightly_retrain):
        if hasattr(module, "update_catalog"):
            wrap(module, "update_catalog", by_stage=False)


def empty_copy_dir(parser: argparse.ArgumentParser, source: Path, work: Path) -> None:
    """Refuse a `work` inside `source` or around it; remove an earlier copy there."""
    if work == source or work in source.parents or source in work.parents:
        parser.error(f"--copy {work}: the copy must lie outside {source}, and it outside the copy")
    if work.exists():
        shutil.rmtree(work)


def fresh_copy(parser: argparse.ArgumentParser, source: Path, work: Path) -> Path:
    """`work` with `source`'s corpus folder, initial model and config (paths renamed) and no data root."""
    empty_copy_dir(parser, source, work)
    work.mkdir(parents=True)
    for name in ("corpus", "tiny-bert"):
        shutil.copytree(source / name, work / name)
    text = (source / "nightly.toml").read_text(encoding="utf-8")
    (work / "nightly.toml").write_text(text.replace(str(source), str(work)), encoding="utf-8")
    return work


def main() -> int:
    parser = harness.parser(__doc__, workdir=None)
    parser.add_argument("workdir", type=Path, help="a workdir of benchmarks/nightly_soak.py (copied, not changed)")
    parser.add_argument(
        "--nights",
        type=int,
        default=5,
        help="nights measured after the warm one (medians: a full collection of the heap adds 0.5 s to a night)",
    )
    parser.add_argument("--copy", type=Path, default=None, help="where the copy goes (default: WORKDIR-stages)")
    parser.add_argument(
        "--in-place",
        action="store_true",
        help="extend WORKDIR itself instead of a copy (a copy's records still name the original's paths: its warm "
        "night rebuilds the ingest under the new path, and its champion is read from the original)",
    )
    parser.add_argument(
        "--fresh-root",
        action="store_true",
        help="copy only the corpus folder, initial model and config (to --copy or WORKDIR-fresh) and start an empty "
        "data root: the same folder's nights without the soak's history",
    )
    parser.add_argument("--start", type=int, default=2000, help="the soak's --start")
    parser.add_argument("--per-night", type=int, default=20, help="the soak's --per-night")
    args = parser.parse_args()
    source = args.workdir.resolve()
    if not (source / "nightly.toml").exists():
        parser.error(f"{source}: no nightly.toml: not a workdir of benchmarks/nightly_soak.py")
    if args.in_place and args.fresh_root:
        parser.error("--in-place and --fresh-root: pick one")
    if args.in_place:
        work = source
    elif args.fresh_root:
        work = fresh_copy(parser, source, (args.copy or source.with_name(source.name + "-fresh")).resolve())
    else:
        work = (args.copy or source.with_name(source.name + "-stages")).resolve()
        empty_copy_dir(parser, source, work)
        shutil.copytree(source, work, symlinks=True)
        config = work / "nightly.toml"
        config.write_text(config.read_text(encoding="utf-8").replace(str(source), str(work)), encoding="utf-8")
    config = work / "nightly.toml"
    done = len(list((work / "corpus").glob("night-*")))
    with open(soak.STACKOVERFLOW, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    from prefect.testing.utilities import prefect_test_harness

    spent: collections.Counter = collections.Counter()
    instrument(spent)
    data, stages = [], collections.defaultdict(list)
    print(f"{work}: {done} nights done", flush=True)
    show = harness.Lines()
    show(f"{done} nights done; one warm night, then {args.nights} measured (CPU s)")
    with prefect_test_harness(server_startup_timeout=120):
        for j in range(args.nights + 1):
            n = done + 1 + j
            soak.add_night(work / "corpus", rows, n, args.start, args.per_night)
            spent.clear()
            try:
                result = soak.night(work / "corpus", work / "data", config)
            except Exception as exc:  # a failed night is a figure, as in the soak
                print(f"night {n}: failed: {exc}", flush=True)
                continue
            if j == 0:
                continue
            data.append(result["data"])
            for key, value in spent.items():
                stages[key].append(value)
            shown = " ".join(f"{k}={v:.3f}" for k, v in sorted(spent.items()))
            show(f"night {n}: data {result['data']:.2f} | {shown}")
    show(f"median of nights {done + 2}-{done + 1 + args.nights}: data {statistics.median(data):.3f}")
    medians = {key: statistics.median(stages[key]) for key in sorted(stages)}
    show("| stage | median CPU s |", "|---|---|", *(f"| {key} | {value:.3f} |" for key, value in medians.items()))
    how = "in place" if args.in_place else "on a fresh root over its folder" if args.fresh_root else "on a copy"
    title = f"A soaked workdir's nights {how}, {done} nights done: each stage's CPU in a fresh process"
    harness.record(args, title, show.lines, {"nights_done": done, "data": data, "stage_medians": medians})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
