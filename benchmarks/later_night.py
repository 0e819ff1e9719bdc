"""The large rung's next night: about 1% of its documents new, as users add pages beside the others.

    .venv/bin/python benchmarks/later_night.py set-aside --workdir WORK [--share 0.01]
    .venv/bin/python benchmarks/corpus_ladder.py --workdir WORK --corpora docs-100k --budget 30
    .venv/bin/python benchmarks/later_night.py run --workdir WORK

`set-aside` (before the rung's first night) moves a seeded `share` of the rung's HTML pages (the rust, linux,
postgresql, cmake and git folders: a file is a page there) out of the corpus into `docs-100k/later/`;
`run` (after the first night) moves them back, a folder of new pages beside the others, and runs the root's next
night with its config unchanged (every default but the first night's budget). It prints the night's wall time,
its decision row's plan and actuals, and the peak memory of its processes. The first night's champion makes this
a later night: what is new since its data is what `[train] replay = "auto"` counts. `labelled` scores the start
and every champion the root promoted on the labelled page check (corpus_ladder.py's, capped as the gate's suite).

    .venv/bin/python benchmarks/later_night.py labelled --workdir WORK

A further night adds a folder the rung has never held (another package's manual, linked page by page as the rung's
own pages are) and runs the next night the same way:

    .venv/bin/python benchmarks/later_night.py run --workdir WORK --add /usr/share/doc/valgrind/html
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

import harness

show = harness.Lines()  # what each step prints, for the entry
PAGES = ("rust", "linux", "postgresql", "cmake", "git")  # one file a page (man and python: a file holds many)
KEYS = ("decision", "reason", "gain", "gain_low", "gain_high", "queries", "documents_new", "files_new", "embedded")


def chosen(relative: str, share: float, seed: int = 0) -> bool:
    """A seeded hash-based choice of a page by its path: the same pages on every machine."""
    digest = hashlib.blake2b(f"{seed}:{relative}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < share


def set_aside(work: Path, share: float) -> dict[str, int]:
    """Moves the chosen pages from `docs-100k/corpus` to `docs-100k/later` (once; a second call counts them)."""
    from corpus_ladder import build_corpus

    corpus, _, _ = build_corpus("docs-100k", work)
    later = work / "docs-100k" / "later"
    if (work / "docs-100k" / "data" / "models").exists() and not later.exists():
        raise SystemExit(f"{work}/docs-100k/data has had its first night: set pages aside before it")
    moved = 0
    for part in PAGES:
        for path in sorted(p for p in (corpus / part).rglob("*") if p.is_file() or p.is_symlink()):
            relative = str(path.relative_to(corpus))
            if chosen(relative, share):
                target = later / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                path.rename(target)  # a link moves as a link: nothing is copied
                moved += 1
    total = sum(1 for _ in later.rglob("*.html")) if later.exists() else 0
    show(f"set aside {moved} pages now, {total} in docs-100k/later")
    return {"moved": moved, "later": total}


def add_folder(corpus: Path, source: Path) -> int:
    """Links every HTML page of `source` into a new folder of the corpus named after its package (once)."""
    name = source.name if source.name != "html" else source.parent.name
    target = corpus / name
    if target.exists():
        raise SystemExit(f"{target} exists: the rung has had {source} already; add another folder")
    files = sorted(p for p in source.rglob("*.html") if p.is_file())
    if not files:
        raise SystemExit(f"{source}: no HTML pages to add")
    for path in files:
        link = target / path.relative_to(source)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(path.resolve())
    return len(files)


def run(work: Path, add: Path | None = None) -> dict:
    """Puts the set-aside pages back beside the others (or links a new folder in) and runs the root's next night."""
    import pyarrow.parquet as pq
    from large_corpus import TreeMemory

    from flows.nightly_retrain import nightly_retrain

    corpus, later, root = (work / "docs-100k" / p for p in ("corpus", "later", "data"))
    if not (root / "models" / "promotions").exists():
        raise SystemExit(f"{root}: no first night yet (corpus_ladder.py --corpora docs-100k)")
    back = 0
    for path in sorted(p for p in later.rglob("*") if p.is_file() or p.is_symlink()) if later.exists() else []:
        target = corpus / path.relative_to(later)
        target.parent.mkdir(parents=True, exist_ok=True)
        path.rename(target)
        back += 1
    if later.exists():
        shutil.rmtree(later)
    show(f"{back} pages back beside the others")
    if add is not None:
        show(f"{add_folder(corpus, add)} pages of {add} linked in beside the others")
    started = time.time()
    with TreeMemory() as memory:
        nightly_retrain(root=str(root))
    show(f"night: {time.time() - started:.0f} s wall, {memory.line()}")
    row = max(pq.read_table(root / "models" / "promotions").to_pylist(), key=lambda r: r["created_at"])
    out = {k: row.get(k) for k in KEYS}
    out["plan"], out["actual"] = json.loads(row["plan"] or "null"), json.loads(row["actual"] or "null")
    show("```json", json.dumps(out, indent=1, default=str), "```")
    return out


def labelled(work: Path) -> dict:
    """The labelled page check on the rung (corpus_ladder.py's, capped as the gate's suite: a seeded 2,000 of the
    held-out sections, each retrieving the other sections of its page, P@1): the start and every model the root
    promoted, with whether a gate on it (margin 0, 95% paired test against the start) would promote each."""
    from corpus_ladder import LABELLED
    from gate_ladder import _value, gate_decisions, score

    from models.encoders import minilm_path
    from storage.champion import history
    from tasks.nightly.holdout import HoldoutConfig, split_corpus
    from tasks.nightly.significance import paired_test

    root = work / "docs-100k" / "data"
    models = {"MiniLM (start)": str(minilm_path())}
    for n, champion in enumerate(history(root), 1):
        models[f"champion {n} ({champion['flow_run']})"] = champion["export"]
    share = HoldoutConfig(share=0.2, seed=0, label_field="page", text_field="text", title_field="title")
    split = split_corpus(work / "docs-100k" / "corpus", share, work / "docs-100k" / "labelled")
    table = score(models, {LABELLED: ("stackoverflow", split.stackoverflow)}, {})
    decisions = gate_decisions(table, "MiniLM (start)", [LABELLED])
    start = table["MiniLM (start)"][LABELLED][1]
    out = {}
    for m, row in table.items():
        test = paired_test(row[LABELLED][1], start) if m != "MiniLM (start)" else None
        interval = {"gain": test.gain, "low": test.low, "high": test.high} if test else {}
        out[m] = {
            "p@1": _value(row[LABELLED]),
            "queries": len(start),
            **interval,
            "gate": decisions.get(m, {}).get(LABELLED),
        }
    show("```json", json.dumps(out, indent=1), "```")
    return out


def main() -> None:
    parser = harness.parser(__doc__, workdir="required", workdir_help="corpus_ladder.py's workdir (docs-100k in it)")
    parser.add_argument(
        "step",
        choices=("set-aside", "run", "labelled"),
        help="set-aside before the first night, run after it; labelled: the page check on every champion",
    )
    parser.add_argument("--share", type=float, default=0.01, help="of the HTML pages set aside (set-aside)")
    parser.add_argument("--add", type=Path, help="run: a folder of pages the rung never held, linked in as new")
    args = parser.parse_args()
    work = harness.workdir(args)
    figures = {
        "set-aside": lambda: set_aside(work, args.share),
        "run": lambda: run(work, args.add),
        "labelled": lambda: labelled(work),
    }[args.step]()
    title = {
        "set-aside": f"The large rung: {args.share:.0%} of its HTML pages set aside for a later night",
        "run": "The large rung's next night" + (f": {args.add} added" if args.add else ""),
        "labelled": "The labelled page check on every champion of the large rung",
    }[args.step]
    harness.record(args, title, show.lines, figures)


if __name__ == "__main__":
    main()
