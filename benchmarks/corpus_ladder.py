"""Does the nightly default win on every corpus shape? Corpora x recipes in one table, from one first night each.

    .venv/bin/python benchmarks/corpus_ladder.py --workdir WORK [--corpora python-docs,man-pages,stackoverflow]
        [--method gur] [--record]

For each corpus, a fresh root and a `nightly.toml` naming only the folder (what a new user writes; for
StackOverflow titles also the fields), then one `gur nightly` with every default (`method = "auto"`):
the recipe the corpus's shape picks, trained from MiniLM, gated against it. The table then scores, on the
same held-out records the gate used (the night's seeded 20%), the start, the night's candidate and the
candidate's unmixed run (the recipe before its mix toward the start):
- the label-free suite: `heldout-title` and `heldout-ict` (MRR@10);
- a labelled check where the corpus has labels the recipe never trains on: the page of a section (Python
  documentation, manual pages: a section's prose -> the other sections of its page, P@1) or a title's tag
  (StackOverflow, the night's own suite);
- the guard: STS-B train Spearman.
`--variants` adds a row per documents recipe variant (benchmarks/document_variants.py's names, e.g. `gur-33`: a
third of the batches GUR's pairs), each trained from the start on the night's own split output and the shuffle
output mined from it, and scored on the same records (rows to compare, never what chose the default:
recipe_dev.py's inner splits do).
`--method` names the night's method instead of `auto` (a root of its own: `data-<method>`), e.g. `gur`: GUR's
LCS pairs and losses warm-started from MiniLM within the night's time budget. Each row says whether the
night's gate promoted it, and whether a gate on the labelled check (margin 0,
95% paired test against the start) would.

Corpora (each built once into the workdir):
- `python-docs`: the Python documentation's reST sources (Debian's `python3-doc`), one document per section
  (benchmarks/gate_ladder.py: `docs_corpus`), the page as the label;
- `man-pages`: the manual pages (`/usr/share/man/man1` to `man8`, without the Google Cloud SDK's generated
  pages), one document per section of a page (`.SH` / `.SS`), pages in a seeded order until 3,000
  sections; the page as the label;
- `python-docs-html`: the same pages as the site serves them (`python3-doc`'s HTML), read by ingest's HTML
  reader: one document per h1-h3 section, its page as the label (the `python-docs` night against its HTML);
- `stackoverflow`: the 16,000 StackOverflow titles with their tags (the shared data), a labelled question corpus;
- `docs-100k`: the large rung, 100,000+ sections of the manual pages, the Python documentation and `rust-doc`
  (benchmarks/large_corpus.py); its night's decision row alone (a table row would embed every section again).
`--budget M` writes `[budget] minutes = M` into the nights' configs (the product's default otherwise); `--dtype`
the training precision (`[train] options = {dtype = ...}`, a root of its own: `data-<dtype>`), e.g. fp32 and bf16
side by side.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import harness
from harness import shared_data
from large_corpus import TreeMemory
from man_pages import MAN, man_corpus

from models.training.precision import DTYPES

TITLE, ICT, LABELLED, STS = "title MRR@10", "ICT MRR@10", "labelled P@1", "STS-B train rho"


# --- one corpus: its first night, then the table ------------------------------------------------------------


def build_corpus(name: str, work: Path) -> tuple[Path, dict[str, str], dict]:
    """(corpus folder, its [corpus] fields, counts), built once."""
    from gate_ladder import PYTHON_DOCS, docs_corpus

    corpus = work / name / "corpus"
    done = work / name / "corpus.json"
    if name == "stackoverflow":
        corpus.mkdir(parents=True, exist_ok=True)
        link = corpus / "train.tsv"
        if not link.exists():
            link.symlink_to(shared_data("stackoverflow", "train.tsv"))  # a link: shared data is never copied
        return corpus, {"text_field": "title", "title_field": ""}, {"titles": 16000}
    if not done.exists():
        if name == "docs-100k":
            from large_corpus import large_corpus

            counts = large_corpus(corpus)
        elif name == "python-docs-html":
            counts = html_corpus(PYTHON_DOCS, corpus)
        else:
            counts = docs_corpus(PYTHON_DOCS, corpus) if name == "python-docs" else man_corpus(MAN, corpus)
        done.write_text(json.dumps(counts), encoding="utf-8")
    return corpus, {}, json.loads(done.read_text(encoding="utf-8"))


def html_corpus(sources: Path, out: Path) -> dict[str, int]:
    """The Python documentation's HTML pages as the site serves them (`html/<page>.html` of every page whose reST
    source `html/_sources/<page>.rst.txt` the `python-docs` corpus reads), linked into `out` in their own layout:
    a folder of pages for ingest's HTML reader (one document per section, the page as its label)."""
    html = sources.parent
    pages = 0
    for source in sorted(sources.rglob("*.rst.txt")):
        page = source.relative_to(sources).as_posix().removesuffix(".rst.txt")
        target = html / f"{page}.html"
        if target.is_file():
            link = out / f"{page}.html"
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                link.symlink_to(target)  # a link: the installed documentation is never copied
            pages += 1
    return {"pages": pages}


def first_night(
    corpus: Path,
    fields: dict[str, str],
    root: Path,
    method: str = "auto",
    budget: float = 0,
    dtype: str = "",
    teacher: str = "",
) -> dict:
    """The root's first decision row; the night runs (with every default but `method`, `budget` minutes and the
    training `dtype` where given) when the root has none. Prints its wall time and the peak memory of its
    processes."""
    import pyarrow.parquet as pq

    from flows.nightly_retrain import nightly_retrain
    from storage.layout import recorded_path

    rows = root / "models" / "promotions"
    if not rows.exists():
        root.mkdir(parents=True, exist_ok=True)
        extra = "".join(f'{k} = "{v}"\n' for k, v in fields.items())
        train = f'\n[train]\nmethod = "{method}"\n' if method != "auto" else ""
        if dtype:
            train += ("" if train else "\n[train]\n") + f'options = {{dtype = "{dtype}"}}\n'
        if teacher:
            train += ("" if train else "\n[train]\n") + f"teacher = {json.dumps(teacher)}\n"
        train += f"\n[budget]\nminutes = {budget:g}\n" if budget else ""
        (root / "nightly.toml").write_text(f'[corpus]\npath = "{corpus}"\n{extra}{train}', encoding="utf-8")
        started = time.process_time(), time.time()
        with TreeMemory() as memory:
            nightly_retrain(root=str(root))
        print(f"night: {time.time() - started[1]:.0f} s wall, {memory.line()}", flush=True)
    first = min(pq.read_table(rows).to_pylist(), key=lambda r: r["created_at"])
    # the row names models under the root relative to it (as every record of a root)
    return {**first, **{k: recorded_path(root, first[k]) for k in ("candidate", "champion")}}


def variant_rows(root: Path, night: dict, manifest: dict, variants: list[str]) -> dict[str, str]:
    """{row name: export} of documents variants trained from the night's start on the night's split output (the
    candidate's own) and the shuffle output mined from it."""
    from document_variants import VARIANTS

    from flows.train import shuffle_of, train_flow
    from storage.stage_output import ref_dir

    if not variants:
        return {}
    if manifest["config"]["method"] != "documents":
        raise SystemExit("--variants are documents recipe variants: the night trained " + manifest["config"]["method"])
    split_path = manifest["inputs"]["split"]
    split = {"stage": "split", "fingerprint": Path(split_path).name, "path": split_path}
    pairs = shuffle_of(root, split)  # the GUR pairs the night mined from it
    rows = {}
    for name in variants:
        ref = train_flow(
            method="documents", root=str(root), init_from=night["champion"], options=VARIANTS[name], shards=split,
            pairs=pairs,
        )  # fmt: skip
        rows[f"documents {name}"] = str(ref_dir(root, ref) / "export")
    return rows


def ladder(
    name: str,
    work: Path,
    stsb: Path,
    method: str = "auto",
    variants: list[str] | None = None,
    budget: float = 0,
    dtype: str = "",
    teacher: str = "",
    shelf: str = "",
) -> dict:
    from gate_ladder import _value, gate_decisions, score

    from storage.stage_output import ref_dir
    from tasks.nightly.holdout import HoldoutConfig, split_corpus

    corpus, fields, counts = build_corpus(name, work)
    root = work / name / ("data" if method == "auto" else f"data-{method}")
    root = root.with_name(f"{root.name}-{dtype}") if dtype else root
    root = root.with_name(f"{root.name}-teacher-{Path(teacher).name}") if teacher else root
    night = first_night(corpus, fields, root, method, budget, dtype, teacher)
    if name == "docs-100k":  # the rung's table would embed 100,000 sections per row: its night's row alone
        keys = ("decision", "reason", "gain", "gain_low", "gain_high", "queries", "plan", "actual", "embedded")
        return {"corpus": name, "counts": counts, "night": {k: night.get(k) for k in keys}, "table": {}}
    candidate = Path(night["candidate"])
    manifest = json.loads((candidate.parent / "_manifest.json").read_text(encoding="utf-8"))
    models = {"MiniLM (start)": night["champion"], f"{manifest['config']['method']} default": str(candidate)}
    if manifest.get("unmixed"):
        models[f"{manifest['config']['method']} unmixed"] = str(ref_dir(root, manifest["unmixed"]) / "export")
    models.update(variant_rows(root, night, manifest, variants or []))
    if shelf:  # the best general model installed, untrained: what the candidate must beat
        models[f"{shelf_name(shelf)} (shelf)"] = shelf_folder(shelf, work)
    suites: dict[str, tuple[str, str]] = {}
    if name == "stackoverflow":
        (suite,) = root.glob("holdout/*/holdout.tsv")
        suites[LABELLED] = ("stackoverflow", str(suite))
    else:
        (title, ict) = (next(root.glob(f"holdout/*/{task}")) for task in ("heldout-title", "heldout-ict"))
        suites = {TITLE: ("beir", str(title)), ICT: ("beir", str(ict))}
        share = HoldoutConfig(share=0.2, seed=0, label_field="page", text_field="text", title_field="title")
        labelled = split_corpus(corpus, share, work / name / "labelled")
        suites[LABELLED] = ("stackoverflow", labelled.stackoverflow)
    table = score(models, suites, {STS: ("stsb", str(stsb))} if stsb.is_file() else {})
    start = "MiniLM (start)"
    decisions = gate_decisions(table, start, [LABELLED])
    return {
        "corpus": name,
        "counts": counts,
        "night": {k: night.get(k) for k in ("decision", "reason", "gain", "gain_low", "gain_high", "p_value")},
        "table": {m: {k: _value(v) for k, v in row.items()} for m, row in table.items()},
        "labelled_gate": {m: d[LABELLED] for m, d in decisions.items()},
        "candidate": str(candidate),
    }


def shelf_name(shelf: str) -> str:
    return "all-mpnet-base-v2" if shelf == "mpnet" else Path(shelf).name


def shelf_folder(shelf: str, work: Path) -> str:
    """`mpnet`: all-mpnet-base-v2 as `./run.sh mpnet` installed it (unpacked once under the workdir); else a
    sentence-transformers folder."""
    if shelf != "mpnet":
        return shelf
    from tasks.sts.models import mpnet_folder

    return str(mpnet_folder(work / "shelf"))


def markdown(result: dict) -> str:
    columns = [c for c in (TITLE, ICT, LABELLED, STS) if any(c in row for row in result["table"].values())]
    lines = [
        "| model | " + " | ".join(columns) + " | night's gate | labelled gate |",
        "|---" * (len(columns) + 3) + "|",
    ]
    for model, row in result["table"].items():
        cells = [f"{row[c]:.3f}" if c in row else "-" for c in columns]
        if model.startswith("MiniLM"):
            gates = ["(start)", "(start)"]
        else:
            night = result["night"]["decision"] if model.endswith("default") else "-"
            gates = [night, "promote" if result["labelled_gate"].get(model) else "refuse"]
        lines.append(f"| {model} | " + " | ".join(cells) + f" | {gates[0]} | {gates[1]} |")
    return "\n".join(lines)


def main() -> None:
    parser = harness.parser(__doc__, workdir="required", workdir_help="keeps the corpora, the roots and their runs")
    parser.add_argument(
        "--corpora",
        default="python-docs,man-pages",
        help="python-docs, python-docs-html, man-pages, stackoverflow, docs-100k (the large rung: large_corpus.py)",
    )
    parser.add_argument(
        "--budget", type=float, default=0, help="the nights' [budget] minutes (default: the product's default)"
    )
    parser.add_argument("--stsb", default=str(shared_data("stsb", "stsb-en-train.csv")))
    parser.add_argument("--variants", default="", help="documents variants to add as rows (recipe_dev.py's names)")
    parser.add_argument(
        "--method", default="auto", help="the night's [train] method: auto (the default) or one named (own root)"
    )
    parser.add_argument(
        "--dtype",
        default="",
        choices=("", *DTYPES),
        help="the nights' training dtype ([train] options; own root: data-DTYPE; default: the product's)",
    )
    parser.add_argument(
        "--teacher",
        default="",
        help='the nights\' [train] teacher: "auto" (all-mpnet-base-v2 where installed) or a folder (own root)',
    )
    parser.add_argument(
        "--shelf", default="", help="a row for a general model as installed: mpnet, or a sentence-transformers folder"
    )
    args = parser.parse_args()
    work, show = harness.workdir(args), harness.Lines()
    results = []
    for name in args.corpora.split(","):
        started = time.time()
        variants = [v for v in args.variants.split(",") if v]
        result = ladder(
            name.strip(), work, Path(args.stsb), args.method, variants, args.budget, args.dtype, args.teacher,
            args.shelf,
        )  # fmt: skip
        results.append(result)
        night = result["night"]
        show(f"## {name}: {result['counts']}", f"night: {night['decision']}: {night['reason']}", markdown(result))
        show(f"({time.time() - started:.0f} s wall for this corpus)")
    method = "" if args.method == "auto" else f", method {args.method}"
    method += f", dtype {args.dtype}" if args.dtype else ""
    method += f", teacher {args.teacher}" if args.teacher else ""
    harness.record(args, f"Corpus ladder: {args.corpora}{method}", show.lines, {"corpora": results})


if __name__ == "__main__":
    main()
