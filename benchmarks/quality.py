"""TFCSG and SimCSE against MiniLM and BM25 on held-out StackOverflow titles (the paper's Table 3 layout).

    .venv/bin/python benchmarks/quality.py                    # headline rows + standard ablations (~2 h, 2 cores)
    .venv/bin/python benchmarks/quality.py --only test --seeds 0   # the headline rows, one seed
    .venv/bin/python benchmarks/quality.py --only dev --ablations minilm tfcsg "kw+cl"
    .venv/bin/python benchmarks/quality.py --preset paper     # on a GPU
    .venv/bin/python benchmarks/quality.py --only dev --ablations "kw+s2s, s2s weight 4, mix 0.75"  # a frontier row
    .venv/bin/python benchmarks/quality.py --report           # run nothing: tables, the rule, the frontier chart
    .venv/bin/python benchmarks/quality.py --only dev --ablations minilm mpnet "tfcsg from mpnet, bf16"

Split: the shared data's `stackoverflow/train.tsv` per tag in file order, the first 80% train, the last
20% held out (12,800 / 3,200, like the paper's 16k / 4k). Keywords are mined and models trained on
the training titles only, through the product's flows (`mine-keywords`, `train`), and never read
the `tag` column; the training file handed to them has no tag column. Scores: question retrieval
on the held-out titles (each queries the other held-out titles, relevant = same tag: P@1/5/10,
MAP, MRR) and STS-B en dev Spearman. The ablations (`--ablations`, one seed each) run on a dev
split instead: the training part split once more the same way (10,240 / 2,560). Defaults were
chosen there, so the held-out part is only ever reported: its rows (`--rows`) are the baselines,
TFCSG's default and SimCSE over `--seeds` (mean +- std), and the paper's exact three-loss recipe
(first seed). Results go to `<workdir>/quality.json` as they come (a rerun reuses every
finished training run: the train flow's cache). Wall time is printed per row and in total.

The frontier: rows named `BASE, mix W` are BASE's run with its weights mixed back toward MiniLM's
(`interpolate: W`, one training per BASE), and the anchor rows train with `sim_anchor_weight` or
`l2sp_weight`. After a dev invocation the rule that picks the default (`choose_default`) runs on
every dev row in the results file and `<workdir>/frontier.png` plots P@1 against STS-B dev.

The base-size start: `mpnet` scores all-mpnet-base-v2 zero-shot and `tfcsg from mpnet` trains the
default recipe from it (`./run.sh mpnet` installs it); `, bf16` rows train in bf16 autocast
(`dtype: bf16`, the CPU's bf16 units). The rule never picks a row that starts from another model.
"""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

import harness
import numpy as np
from harness import shared_data

# name -> (method, TrainConfig overrides); run with every seed when in SEEDED, else with the first seed
TRAINED: dict[str, tuple[str, dict]] = {
    "tfcsg": ("tfcsg", {}),  # the default (preset cpu: kw+s2s, s2s weight 8, topic-masked, mixed 0.75 with the start)
    "simcse": ("simcse", {}),  # plain unsupervised SimCSE, every in-batch negative
    "paper: cl+kl+s2s": ("tfcsg", {"losses": "cl+kl+s2s", "negatives": "all"}),
    "cl, topic-masked": ("tfcsg", {"losses": "cl"}),
    "cl+kl": ("tfcsg", {"losses": "cl+kl"}),
    "cl+s2s": ("tfcsg", {"losses": "cl+s2s"}),
    "cl+kl+s2s": ("tfcsg", {"losses": "cl+kl+s2s"}),
    "kw": ("tfcsg", {"losses": "kw"}),
    "kw, all negatives": ("tfcsg", {"losses": "kw", "negatives": "all"}),
    "kw+cl": ("tfcsg", {"losses": "kw+cl"}),
    "kw+kl": ("tfcsg", {"losses": "kw+kl"}),
    "kw+s2s": ("tfcsg", {"losses": "kw+s2s"}),
    "kw+cl+s2s": ("tfcsg", {"losses": "kw+cl+s2s"}),
    "kw+s2s, s2s weight 2": ("tfcsg", {"losses": "kw+s2s", "s2s_weight": 2.0}),
    "kw+s2s, s2s weight 4": ("tfcsg", {"losses": "kw+s2s", "s2s_weight": 4.0}),
    "kw+s2s, s2s weight 8": ("tfcsg", {"losses": "kw+s2s", "s2s_weight": 8.0}),
    "kw+s2s, lr 6e-5": ("tfcsg", {"losses": "kw+s2s", "lr": 6e-5}),
    "kw+s2s, topic-spread batches": ("tfcsg", {"losses": "kw+s2s", "sampling": "topic-spread"}),
    "kw+s2s, every negative, topic-spread batches": (
        "tfcsg",
        {"losses": "kw+s2s", "negatives": "all", "sampling": "topic-spread"},
    ),
    "s2s": ("tfcsg", {"losses": "s2s"}),
    "kw+cl+kl+s2s": ("tfcsg", {"losses": "kw+cl+kl+s2s"}),
    "kw+kl, linear x_hat": ("tfcsg", {"losses": "kw+kl", "kl_activation": "linear"}),
    "kw, 2 epochs": ("tfcsg", {"losses": "kw", "epochs": 2.0}),
    "kw, 3 epochs": ("tfcsg", {"losses": "kw", "epochs": 3.0}),
    "simcse, topic-masked": ("simcse", {"negatives": "topic-masked"}),
}
# The frontier: ways to keep the start model's general similarity while the domain tasks train
# (models.tfcsg.model: the anchors; models.training.interpolate: the mix with the start's weights, w * trained).
FRONTIER_BASES = {
    "kw+s2s, s2s weight 2": {"losses": "kw+s2s", "s2s_weight": 2.0},  # the default before the frontier work
    "kw+s2s, s2s weight 4": {"losses": "kw+s2s", "s2s_weight": 4.0},
    "kw+s2s, s2s weight 8": {"losses": "kw+s2s", "s2s_weight": 8.0},
    "s2s": {"losses": "s2s"},
    "cl+s2s": {"losses": "cl+s2s"},
}
MIX_WEIGHTS = (0.25, 0.5, 0.75)
for _base, _options in FRONTIER_BASES.items():
    for _w in MIX_WEIGHTS:
        TRAINED[f"{_base}, mix {_w:g}"] = ("tfcsg", {**_options, "interpolate": _w})
TRAINED.update(
    {
        "kw+s2s, s2s weight 4, similarity anchor 10": (
            "tfcsg",
            {"losses": "kw+s2s", "s2s_weight": 4.0, "sim_anchor_weight": 10.0},
        ),
        "s2s, similarity anchor 10": ("tfcsg", {"losses": "s2s", "sim_anchor_weight": 10.0}),
        "kw+s2s, s2s weight 4, l2sp 0.1": ("tfcsg", {"losses": "kw+s2s", "s2s_weight": 4.0, "l2sp_weight": 0.1}),
    }
)
# Precision and the base-size start (all-mpnet-base-v2, `./run.sh mpnet`): the default recipe from
# another start or in bf16 (models/training/precision.py). "mpnet" is the start's own zero-shot row. They train
# with the preset's values, like "tfcsg"; the rule that picks the default never looks at a row that
# starts from another model (START), since the start is the user's choice, not a setting.
MPNET = "mpnet"  # resolved to the folder `./run.sh mpnet` installs, unpacked under the data root
TRAINED.update(
    {
        "tfcsg, bf16": ("tfcsg", {"dtype": "bf16"}),
        "tfcsg from mpnet": ("tfcsg", {"init_from": MPNET}),
        "tfcsg from mpnet, bf16": ("tfcsg", {"init_from": MPNET, "dtype": "bf16"}),
    }
)
START = ("mpnet", "tfcsg from mpnet", "tfcsg from mpnet, bf16")  # rows that start from another model
PRESET_ROWS = ("tfcsg", "simcse", "tfcsg, bf16", "tfcsg from mpnet", "tfcsg from mpnet, bf16")
DEFAULT_ROW = "tfcsg"
SEEDED = ("tfcsg", "simcse")
HEADLINE = ("bm25", "minilm", "tfcsg", "simcse", "paper: cl+kl+s2s")  # scored on the held-out part
# The dev rows a plain run scores (one seed each): the paper's losses and the keyword task, each alone
# and combined, and both kinds of negatives; about 80 min on 2 cores. Every other row of TRAINED runs
# when named in --ablations.
ABLATIONS = (
    "tfcsg",
    "paper: cl+kl+s2s",
    "cl, topic-masked",
    "cl+kl",
    "cl+s2s",
    "cl+kl+s2s",
    "kw",
    "kw, all negatives",
    "kw+cl",
    "kw+kl",
    "kw+cl+kl+s2s",
)
BASELINES = ("bm25", "minilm", "mpnet")
# Table 3 of the paper (StackOverflow, their 4k test split; BERT-base / RoBERTa-base encoders)
PUBLISHED = {
    "BERT-Base": (0.510, 0.409, 0.355, 0.542, 0.625),
    "SimCSE-BERT-Base": (0.727, 0.656, 0.612, 0.744, 0.767),
    "TFCSG-BERT-Base": (0.816, 0.814, 0.809, 0.832, 0.846),
    "SimCSE-RoBERTa-Base": (0.776, 0.714, 0.684, 0.809, 0.838),
    "TFCSG-RoBERTa-Base": (0.832, 0.822, 0.812, 0.854, 0.882),
}
COLUMNS = ("P@1", "P@5", "P@10", "MAP", "MRR", "STS-B")


def cut_per_tag(rows: list[dict], percent: int) -> tuple[list[dict], list[dict]]:
    """Per tag in the given order: the first (100 - p)% and the last p%."""
    by_tag: dict[str, list[dict]] = {}
    for row in rows:
        by_tag.setdefault(row["tag"], []).append(row)
    first, last = [], []
    for tag_rows in by_tag.values():
        cut = len(tag_rows) - round(len(tag_rows) * percent / 100)
        first += tag_rows[:cut]
        last += tag_rows[cut:]
    return first, last


def split_stackoverflow(path: Path, heldout_percent: int) -> tuple[list[dict], list[dict]]:
    """Per tag in file order: the first (100 - p)% train, the last p% held out."""
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    train, held = cut_per_tag(rows, heldout_percent)
    key = lambda r: int(r["id"])  # noqa: E731 - back to file order
    return sorted(train, key=key), sorted(held, key=key)


def write_training_file(rows: list[dict], path: Path) -> Path:
    """id and title only: the training side never sees a tag. An unchanged file is left alone, so its
    mtime (part of the ingest fingerprint) stays and a rerun is a cache hit all the way down."""
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, delimiter="\t")
    writer.writerow(["id", "title"])
    writer.writerows([r["id"], r["title"]] for r in rows)
    data = buffer.getvalue().encode("utf-8")  # bytes: read_text would turn the writer's \r\n into \n
    if not path.exists() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return path


def model_folder(name: str, root: Path) -> str:
    """`mpnet` -> all-mpnet-base-v2's folder under the data root (unpacked once); any other name as it is."""
    if name != MPNET:
        return name
    from tasks.sts.models import mpnet_folder

    return str(mpnet_folder(root))


def score(spec: str, heldout, stsb) -> dict[str, float]:
    from tasks.evaluate.models import resolve_model
    from tasks.evaluate.scoring import question_retrieval, sts

    model = resolve_model(spec)
    values = {}
    for m in question_retrieval(model, heldout):
        values[{"precision": f"P@{m.k}", "map": "MAP", "mrr": "MRR"}.get(m.metric, m.metric)] = m.value
    if spec != "bm25":
        values["STS-B"] = next(m.value for m in sts(model, stsb) if m.metric == "spearman")
    return values


def fmt(values: list[dict[str, float]], column: str) -> str:
    xs = [v[column] for v in values if column in v]
    if not xs:
        return "-"
    return f"{np.mean(xs):.3f}" + (f" ± {np.std(xs):.3f}" if len(xs) > 1 else "")


def table(results: dict[str, dict]) -> str:
    lines = [
        "| model | seeds | " + " | ".join(COLUMNS) + " | train min |",
        "|---|---|" + "---|" * (len(COLUMNS) + 1),
    ]
    for name, res in results.items():
        runs = res["runs"]
        minutes = [r["train_s"] / 60 for r in runs if r.get("train_s")]
        cells = [fmt([r["scores"] for r in runs], c) for c in COLUMNS]
        lines.append(
            f"| {name} | {len(runs)} | " + " | ".join(cells) + f" | {np.mean(minutes):.1f} |"
            if minutes
            else f"| {name} | {len(runs)} | " + " | ".join(cells) + " | - |"
        )
    lines.append("| *published (paper's test split)* | | | | | | | | |")
    for name, vals in PUBLISHED.items():
        lines.append(f"| {name} | | " + " | ".join(f"{v:.3f}" for v in vals) + " | - | |")
    return "\n".join(lines)


def save_rows(path: Path, split: str, results: dict[str, dict]) -> None:
    """Merge this invocation's rows into the results file under a lock: rows and seeds of earlier invocations,
    and of one running beside this one (other rows or other seeds), stay."""
    import fcntl

    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        saved = json.loads(path.read_text()) if path.exists() else {}
        rows = saved.setdefault(split, {})
        for name, res in results.items():  # a row's runs merge by seed: seeds run elsewhere stay
            seeds = {r.get("seed") for r in res["runs"]}
            kept = [r for r in rows.get(name, {}).get("runs", []) if r.get("seed") not in seeds]
            runs = sorted(kept + res["runs"], key=lambda r: (r.get("seed") is None, r.get("seed") or 0))
            rows[name] = {**res, "runs": runs}
        path.write_text(json.dumps(saved, indent=2) + "\n")


def split_rows(path: Path, percent: int, split: str) -> tuple[list[dict], list[dict]]:
    """test: (training part, held-out part); dev: the training part split again the same way."""
    train_rows, held_rows = split_stackoverflow(path, percent)
    if split == "dev":  # the held-out part is not read at all
        train_rows, held_rows = cut_per_tag(train_rows, percent)
    return train_rows, held_rows


def train_seconds(root: Path, manifest: dict) -> float:
    """A run's own time, also when this call was a cache hit. A mixed run adds its unmixed run's time when
    that run trained earlier (reused), not when it trained inside the mixed run's own time (one call)."""
    own = manifest["timings"]["total_s"]
    if not manifest.get("unmixed"):
        return own
    unmixed = json.loads((root / manifest["unmixed"]["path"] / "_manifest.json").read_text())
    inside = manifest["started_at"] <= unmixed["started_at"] and unmixed["finished_at"] <= manifest["finished_at"]
    return own if inside else own + unmixed["timings"]["total_s"]


def run_split(split: str, rows: list[str], args, root: Path, results_path: Path, stsb) -> dict[str, dict]:
    """Keywords on the split's training titles, then each row: trained (per seed) and scored."""
    from flows.mine_keywords import mine_keywords
    from flows.train import train_flow
    from tasks.evaluate.data import LabelledTexts

    train_rows, held_rows = split_rows(Path(args.stackoverflow), args.heldout_percent, split)
    names = sorted({r["tag"] for r in held_rows})
    scored = LabelledTexts(
        f"stackoverflow-{split}",
        [r["title"] for r in held_rows],
        np.array([names.index(r["tag"]) for r in held_rows]),
        names,
    )
    train_file = write_training_file(train_rows, root.parent / split / "so-train.tsv")
    print(f"split {split}: {len(train_rows)} training titles, {len(held_rows)} scored ({len(names)} tags)")
    t0 = time.time()
    kw = mine_keywords(input_path=str(train_file), text_field="title", title_field="", k=args.k, root=str(root))
    print(f"keywords {kw['fingerprint']} in {time.time() - t0:.0f} s", flush=True)
    results: dict[str, dict] = {}
    for row in rows:
        if row in BASELINES:
            t0 = time.time()
            results[row] = {"runs": [{"scores": score(model_folder(row, root), scored, stsb)}]}
            print(f"{split} {row}: {results[row]['runs'][0]['scores']} ({time.time() - t0:.0f} s)", flush=True)
        else:
            method, overrides = TRAINED[row]
            if row not in PRESET_ROWS:  # the ablations keep the settings they were measured at, whatever the preset's
                overrides = {"s2s_weight": 1.0, "interpolate": 1.0, **overrides}
            start = overrides.get("init_from")
            overrides = {k: v for k, v in overrides.items() if k != "init_from"}
            runs = []
            for seed in args.seeds if row in SEEDED else args.seeds[:1]:
                ref = train_flow(
                    method=method,
                    preset=args.preset,
                    init_from=model_folder(start, root) if start else "",
                    keywords=kw["fingerprint"],
                    options={**overrides, "seed": seed, **({"threads": args.threads} if args.threads else {})},
                    root=str(root),
                )
                train_s = train_seconds(root, json.loads((root / ref["path"] / "_manifest.json").read_text()))
                export = root / ref["path"] / "export"
                scores = score(str(export), scored, stsb)
                runs.append({"seed": seed, "train": ref["path"], "train_s": train_s, "scores": scores})
                shown = {k: round(v, 4) for k, v in scores.items()}
                print(f"{split} {row} seed {seed}: {shown} (train {train_s / 60:.1f} min)", flush=True)
            results[row] = {"method": method, "overrides": overrides, "runs": runs}
        save_rows(results_path, split, results)
    return results


def dev_point(res: dict) -> tuple[float, float]:
    """(P@1, STS-B) of a row: the mean over its runs."""
    runs = [r["scores"] for r in res["runs"]]
    return float(np.mean([r["P@1"] for r in runs])), float(np.mean([r.get("STS-B", np.nan) for r in runs]))


def choose_default(dev: dict[str, dict], start: str = "minilm", current: str = DEFAULT_ROW) -> tuple[str, str]:
    """The rule that picks the default on the dev split: the best P@1 among rows within .01 of the start's
    STS-B, replacing the current default only when it gains at least .01 of P@1. Returns (row, why)."""
    start_sts = dev_point(dev[start])[1]
    allowed = {
        name: dev_point(res)
        for name, res in dev.items()
        if name not in BASELINES and name not in START and dev_point(res)[1] >= start_sts - 0.01 - 1e-9
    }
    if current not in dev:
        return current, f"{current!r} has no dev row: nothing to compare"
    best = max(allowed, key=lambda n: allowed[n][0], default=current)
    gain = allowed.get(best, dev_point(dev[current]))[0] - dev_point(dev[current])[0]
    if best != current and gain >= 0.01 - 1e-9:
        return best, f"{best!r}: dev P@1 {allowed[best][0]:.3f} (+{gain:.3f}), STS-B {allowed[best][1]:.3f}"
    return current, f"the default stays: the best allowed row {best!r} gains {gain:+.3f} (< .01)"


def frontier_plot(dev: dict[str, dict], path: Path, default: str = DEFAULT_ROW, pick: str | None = None) -> Path:
    """P@1 against STS-B dev for every dev row with both; mixing curves as lines from the start; the default
    marked. The dashed line is the rule's STS-B allowance (the start's value - .01)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 6))
    start = dev_point(dev["minilm"]) if "minilm" in dev else None
    if start:
        ax.axvline(start[1] - 0.01, color="0.5", ls="--", lw=1, label="start STS-B - .01 (the rule)")
    for base in FRONTIER_BASES:
        names = [f"{base}, mix {w:g}" for w in MIX_WEIGHTS]
        pts = [dev_point(dev[n]) for n in names if n in dev]
        if pts and base in dev:
            curve = ([start] if start else []) + pts + [dev_point(dev[base])]
            ax.plot(
                [p[1] for p in curve],
                [p[0] for p in curve],
                "-",
                lw=1,
                alpha=0.6,
                label=f"{base}: mixed with the start",
            )
    same_as_default = [r.get("train") for r in dev.get(default, {}).get("runs", [])]
    for name, res in dev.items():
        p1, sts = dev_point(res)
        if np.isnan(sts) or (name != default and [r.get("train") for r in res["runs"]] == same_as_default):
            continue  # a row that is the default's own run (by another name) is drawn once, as the default
        style = dict(marker="*", s=220, color="crimson", zorder=5) if name == default else dict(s=22, color="k")
        if name == pick and pick != default:
            style = dict(marker="*", s=220, color="gold", edgecolors="k", zorder=5)
        if name == "minilm":
            style = dict(marker="s", s=60, color="tab:blue", zorder=5)
        ax.scatter([sts], [p1], **style)
        ax.annotate(name, (sts, p1), fontsize=6, xytext=(3, 2), textcoords="offset points")
    ax.set_xlabel("STS-B en dev Spearman (general similarity)")
    ax.set_ylabel("question retrieval P@1, dev part (domain)")
    picked = f"; the rule's pick, gold: {pick}" if pick and pick != default else ""
    ax.set_title(f"TFCSG from MiniLM, dev split. Red: the default ({default}){picked}", fontsize=9)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main() -> None:
    parser = harness.parser(__doc__, "/tmp/gur-quality", "the data root and the results file, which reruns extend")
    parser.add_argument("--stackoverflow", default=str(shared_data("stackoverflow", "train.tsv")))
    parser.add_argument("--stsb", default=str(shared_data("stsb", "stsb-en-dev.csv")))
    parser.add_argument("--heldout-percent", type=int, default=20)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rows", nargs="+", default=list(HEADLINE), help="rows scored on the held-out part")
    parser.add_argument(
        "--ablations",
        nargs="+",
        default=[*BASELINES, *ABLATIONS],
        help="rows scored on the dev part (first seed); default: the standard set; any row of TRAINED by name",
    )
    parser.add_argument("--only", choices=["test", "dev"], default=None, help="run one split only")
    parser.add_argument("--preset", default="cpu", choices=["cpu", "paper", "auto"])
    parser.add_argument(
        "--report", action="store_true", help="run nothing: print the tables, the rule and the chart of --workdir"
    )
    parser.add_argument("--k", type=int, default=30, help="GSDMM K for the keywords (the paper's 30)")
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads per training run (default: torch's). Two invocations on different rows at 1 thread "
        "each use 2 cores better than one at 2 (results merge into one file); not part of any run's fingerprint",
    )
    args = parser.parse_args()
    unknown = [r for r in [*args.rows, *args.ablations] if r not in BASELINES and r not in TRAINED]
    if unknown:
        parser.error(f"unknown rows {unknown}; choose from {[*BASELINES, *TRAINED]}")
    from tasks.evaluate.data import load_stsb

    started = time.time()
    work = harness.workdir(args).resolve()
    results_path = work / "quality.json"
    stsb = load_stsb(args.stsb)
    tables = {}
    if args.report:  # nothing runs: the tables, the rule and the chart from what the results file holds
        tables = json.loads(results_path.read_text()) if results_path.exists() else {}
    elif args.only in (None, "dev"):
        tables["dev"] = run_split("dev", args.ablations, args, work / "data", results_path, stsb)
    if not args.report and args.only in (None, "test"):
        tables["test"] = run_split("test", args.rows, args, work / "data", results_path, stsb)
    show = harness.Lines()
    if "dev" in tables and "minilm" in tables["dev"]:
        dev = json.loads(results_path.read_text())["dev"]  # every dev row run so far, this invocation's and earlier
        row, why = choose_default(dev)
        show(f"the rule on the dev split: {why}")
        print(f"frontier chart: {frontier_plot(dev, work / 'frontier.png', pick=row)}")
    for split, results in tables.items():
        title = "held-out part (3,200 titles)" if split == "test" else "dev part (2,560 titles; ablations)"
        show(f"## {title}", table(results))
    show(f"wall time {(time.time() - started) / 60:.1f} min")
    print(f"results {results_path}")
    parts = " and ".join({"test": "the held-out part", "dev": "the dev part"}[split] for split in tables)
    harness.record(args, f"TFCSG and SimCSE against MiniLM and BM25 on StackOverflow: {parts}", show.lines, tables)


if __name__ == "__main__":
    main()
