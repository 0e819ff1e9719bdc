"""Choose the documents recipe on a corpus's training side only: an inner held-out split, never the reported one.

    .venv/bin/python benchmarks/recipe_dev.py --workdir WORK --corpus python-docs [--variants coin,title,each]

The corpus ladder (benchmarks/corpus_ladder.py) reports each corpus's first night on its seeded 20% held out
(`holdout_seed = 0`). Choosing the recipe on those records would tune to the split it reports. Here the
candidates are compared on the ladder root's *training side* (its `holdout/*/train/` mirror, which the
reported held-out records never enter), split again with `holdout_seed = 1`: a first night's split and data
stages there make the inner suite and the training input (no night trains: where the ladder root has no night
yet, only its split and data stages run too, the very ones its night then reuses), then each variant trains on
the same split and shuffle outputs from MiniLM and is scored on the inner `heldout-title` and `heldout-ict`
(MRR@10), an inner page check (a held-out section's prose -> the other sections of its page, P@1; the page
read from the id's `page#section`, the inner split's seed) and the STS-B train guard, mixed and unmixed.

Variants (`--variants`, comma-separated): `default` (the preset as it is), `coin` (the first default: one pair
per document an epoch, passages of 128 tokens), `each` (a title pair and an ICT pair of every document an
epoch: twice the steps), `title` (title -> body only), `title-lr6` (title pairs at lr 6e-5), `title-p256`
(title pairs, passages of 256 tokens: the length the evaluation embeds), `title-p256-clustered` (title-p256
with batches filled cluster by cluster by the start model: models/documents/clusters.py), `masked` (the default
with a page's other sections no negatives: models/documents/pages.py), `pages` (`masked` with clusters of pages,
each page's sections spread over its cluster's batches), `random-masked` (`masked` with random batches),
`gur-night` and `gur-night-cl` (a `method = "gur"` night's training: GUR's span-infilling LM and contrastive
losses, or the contrastive loss alone, on the same pairs from the same start, 15 minutes each), `no-gur` (the
default without GUR's pairs: `gur_share = 0`), `gur-20`, `gur-33`, `gur-50` (GUR's LCS pairs of the
night's shuffle output as 20%, 33% or 50% of the batches, on top of the structure pairs' epoch).
Figures are wall time on whatever machine runs it; run nothing else heavy beside it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import harness
from document_variants import GUR_VARIANTS, VARIANTS
from harness import shared_data

TITLE, ICT, PAGE, STS = "inner title MRR@10", "inner ICT MRR@10", "inner page P@1", "STS-B train rho"


def inner_corpus(ladder_root: Path, out: Path) -> Path:
    """Links to the ladder root's training-side files (the reported held-out records are not in them)."""
    (mirror,) = ladder_root.glob("holdout/*/train")
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(mirror.glob("*.jsonl")):
        link = out / path.name
        if not link.exists():
            link.symlink_to(path)
    return out


def inner_labelled(corpus: Path, out: Path) -> Path:
    """The training side's records with their page (the part of the id before `#`, as the ladder's corpora name
    their sections) as a label field, for a page check on the inner split."""
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(corpus.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        lines = [json.dumps({**r, "page": str(r["id"]).partition("#")[0]}) for r in rows if "#" in str(r["id"])]
        (out / path.name).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return out


def prepare(root: Path) -> dict[str, dict[str, str]]:
    """A first night's split and data stages in `root` (its `nightly.toml`), and the start it would train from,
    without the training, scoring or search: the held-out suite and the training inputs (data_stages)."""
    from flows.nightly_retrain import data_stages
    from tasks.nightly.config import load_nightly_config
    from tasks.nightly.night import NightState, open_night

    night = open_night(load_nightly_config(root / "nightly.toml"), root, "recipe-dev", NightState())
    return data_stages(night)


def main() -> None:
    help_work = "the corpus ladder's workdir (its first night has run)"
    parser = harness.parser(__doc__, workdir="required", workdir_help=help_work)
    parser.add_argument("--corpus", default="python-docs")
    parser.add_argument("--variants", default="coin,title,each")
    parser.add_argument("--stsb", default=str(shared_data("stsb", "stsb-en-train.csv")))
    args = parser.parse_args()

    from corpus_ladder import build_corpus
    from gate_ladder import _value, score

    from flows.train import train_flow
    from storage.champion import read_start
    from storage.stage_output import ref_dir
    from tasks.nightly.holdout import HoldoutConfig, split_corpus

    ladder = harness.workdir(args)
    work = ladder / args.corpus
    ladder_corpus, _, _ = build_corpus(args.corpus, ladder)
    if not list((work / "data").glob("holdout/*/train")):  # the ladder's root: its split, as its night splits
        (work / "data").mkdir(parents=True, exist_ok=True)
        (work / "data" / "nightly.toml").write_text(f'[corpus]\npath = "{ladder_corpus}"\n', encoding="utf-8")
        prepare(work / "data")
    corpus = inner_corpus(work / "data", work / "inner" / "corpus")
    root = work / "inner" / "data"
    if not (root / "nightly.toml").exists():
        root.mkdir(parents=True, exist_ok=True)
        (root / "nightly.toml").write_text(
            f'[corpus]\npath = "{corpus}"\n\n[evaluate]\nholdout_seed = 1\n', encoding="utf-8"
        )
    started = time.time()
    inputs = prepare(root)  # cached after the first time
    print(f"inner split and data stages: {time.time() - started:.0f} s wall", flush=True)
    start = read_start(root)["export"]  # the model the night's candidate trained from
    suites = {
        TITLE: ("beir", str(next(root.glob("holdout/*/heldout-title")))),
        ICT: ("beir", str(next(root.glob("holdout/*/heldout-ict")))),
    }
    # the page check, split as the inner night splits (seed 1): its queries are the inner held-out sections
    share = HoldoutConfig(share=0.2, seed=1, label_field="page", text_field="text", title_field="title")
    labelled = inner_labelled(corpus, work / "inner" / "labelled-corpus")
    suites[PAGE] = ("stackoverflow", split_corpus(labelled, share, work / "inner" / "labelled").stackoverflow)
    models = {"MiniLM (start)": start}
    for name in args.variants.split(","):
        started = time.time()
        if name in GUR_VARIANTS:  # a `method = "gur"` night's training on the same pairs, one objective
            from tasks.nightly.recipe import GUR_NIGHT

            ref = train_flow(
                method="gur", root=str(root), init_from=start, options=GUR_NIGHT, objective=GUR_VARIANTS[name],
                shards=inputs["pairs"],
            )  # fmt: skip
        else:
            ref = train_flow(
                method="documents",
                root=str(root),
                init_from=start,
                options=VARIANTS[name],
                shards=inputs["split"],
                pairs=inputs["pairs"],
            )
        manifest = json.loads((ref_dir(root, ref) / "_manifest.json").read_text(encoding="utf-8"))
        models[name] = str(ref_dir(root, ref) / "export")
        if manifest.get("unmixed"):
            models[f"{name} unmixed"] = str(ref_dir(root, manifest["unmixed"]) / "export")
        print(f"{name}: {time.time() - started:.0f} s wall to train (0 when reused)", flush=True)
    extra = {STS: ("stsb", args.stsb)} if Path(args.stsb).is_file() else {}
    table = score(models, suites, extra)
    columns = [TITLE, ICT, PAGE, *extra]
    show = harness.Lines()
    show("| model | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|")
    for model, row in table.items():
        show(f"| {model} | " + " | ".join(f"{_value(row[c]):.3f}" for c in columns) + " |")
    figures = {m: {c: _value(row[c]) for c in columns} for m, row in table.items()}
    title = f"The documents recipe's variants on {args.corpus}'s inner split: {args.variants}"
    harness.record(args, title, show.lines, {"corpus": args.corpus, "table": figures})


if __name__ == "__main__":
    main()
