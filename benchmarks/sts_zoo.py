"""The supervised STS table (the survey's families) on STS-B, with wall time per family and the targets.

    .venv/bin/python benchmarks/sts_zoo.py                          # the cpu preset's English table, dev split
    .venv/bin/python benchmarks/sts_zoo.py sbert-minilm cross-minilm llm-zeroshot llm-lora
    .venv/bin/python benchmarks/sts_zoo.py --lang zh --preset cpu
    .venv/bin/python benchmarks/sts_zoo.py --test path/to/stsb-en-test.csv   # scores the test split too
    .venv/bin/python benchmarks/sts_zoo.py --preset paper           # the survey's settings, on a GPU
    .venv/bin/python benchmarks/sts_zoo.py sbert-minilm --holdout 0.2   # selection: 20% of train scored, dev untouched

Every (family, language, seed) is a unit of the `sts` flow's cache under the data root (`--root`,
else $GUR_HOME, else ./data): a rerun prints finished units at once, with the wall time they took
when they were trained ("cached" beside it), and trains only what is missing. Families run in the
order given (default: the preset's table, target rows first), and each row is printed when done.
Wall time is measured on whatever else the machine runs; say so when quoting it.

Targets (STS-B en dev, cpu preset): the survey's ordering of families (word-vector averages <
recurrent < InferSent < transformers), S-BERT MiniLM and the MiniLM cross-encoder at Spearman
>= 0.90, the SmolLM2 LoRA row above its zero-shot row.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import harness

GROUPS = {  # the survey's ordering: each group's best must beat the previous group's best
    "averages": ("w2v-sg", "w2v-cbow", "glove"),
    "recurrent": ("rnn", "lstm", "gru", "rnn-glove", "lstm-glove", "gru-glove"),
    "InferSent": ("infersent",),
    "transformers": ("cross-minilm", "cross-minilm-mlp", "sbert-minilm", "llm-sft", "llm-lora"),
}


def run_unit(family: str, files, seed: int, preset: str, root: Path) -> tuple[dict, bool]:
    """(the unit's manifest, whether it was reused)."""
    from prefect.states import State

    from storage.stage_output import ref_manifest
    from tasks.sts.task import sts_unit

    result = sts_unit.fn(family=family, files=files, seed=seed, preset=preset, root=str(root))
    cached = isinstance(result, State)
    ref = result.result() if cached else result
    return ref_manifest(root, ref) | {"ref": ref}, cached


def unit_metrics(root: Path, manifest: dict) -> dict[str, dict[str, float]]:
    """split dataset -> metric -> value, from the unit's own metrics rows."""
    import pyarrow.parquet as pq

    from storage.stage_output import ref_dir

    out: dict[str, dict[str, float]] = {}
    for r in pq.read_table(ref_dir(root, manifest["ref"]) / "part-00000.parquet").to_pylist():
        out.setdefault(r["dataset"], {})[r["metric"]] = r["value"]
    return out


def check_targets(spearman: dict[str, float], dataset: str) -> list[str]:
    lines = []
    best = [(g, max((spearman[f] for f in fams if f in spearman), default=None)) for g, fams in GROUPS.items()]
    best = [(g, v) for g, v in best if v is not None]
    ordered = all(a[1] < b[1] for a, b in zip(best, best[1:], strict=False))
    lines.append(f"ordering {' < '.join(f'{g} {v:.3f}' for g, v in best)}: {'holds' if ordered else 'DOES NOT hold'}")
    for family in ("sbert-minilm", "cross-minilm"):
        if family in spearman:
            ok = spearman[family] >= 0.90
            lines.append(f"{family} Spearman {spearman[family]:.4f} >= 0.90: {'met' if ok else 'NOT met'}")
    if "llm-lora" in spearman and "llm-zeroshot" in spearman:
        ok = spearman["llm-lora"] > spearman["llm-zeroshot"]
        lines.append(
            f"llm-lora {spearman['llm-lora']:.4f} > llm-zeroshot {spearman['llm-zeroshot']:.4f}: "
            f"{'met' if ok else 'NOT met'}"
        )
    return [f"[{dataset}] {line}" for line in lines]


def main() -> int:
    from flows.sts import sts_files
    from storage.layout import data_root
    from tasks.sts.families import CPU_TABLE, PAPER_TABLE, parse_family

    parser = harness.parser(__doc__, workdir=None)
    parser.add_argument("families", nargs="*", help="families (default: the preset's table)")
    parser.add_argument("--lang", default="en", choices=["en", "zh"])
    parser.add_argument("--preset", default="cpu", choices=["cpu", "paper"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", default=None)
    parser.add_argument("--dev", default=None)
    parser.add_argument("--test", default=None, help="a test CSV: scored too (the STS-B test split is held back)")
    parser.add_argument(
        "--holdout", type=float, default=0.0, help="score a seeded share of train held out of training (selection)"
    )
    parser.add_argument("--root", default=None, help="data root (default: $GUR_HOME or ./data)")
    args = parser.parse_args()
    families = args.families or list(CPU_TABLE if args.preset == "cpu" else PAPER_TABLE)
    for family in families:
        parse_family(family)
    files = sts_files(args.lang, args.train, args.dev, args.test, args.holdout)
    root = data_root(args.root)
    print(f"data root {root}")
    show = harness.Lines()
    show(f"STS-B {args.lang}, preset {args.preset}, seed {args.seed}")
    show("| family | split | MSE | Pearson | Spearman | wall s | notes |", "|---|---|---|---|---|---|---|")
    spearman: dict[str, dict[str, float]] = {}
    rows = []
    total, started = 0.0, time.perf_counter()
    for family in families:
        manifest, cached = run_unit(family, files, args.seed, args.preset, root)
        wall = manifest["timings"].get("unit_s", 0.0)
        total += wall
        for dataset, m in unit_metrics(root, manifest).items():
            spearman.setdefault(dataset, {})[family] = m["spearman"]
            rows.append({"family": family, "split": dataset, **m, "wall_s": wall, "cached": cached})
            show(
                f"| {family} | {dataset} | {m['mse']:.3f} | {m['pearson']:.4f} | {m['spearman']:.4f} | "
                f"{wall:.0f}{' cached' if cached else ''} | {harness.cell(manifest.get('detail', ''))} |"
            )
    show(f"sum of unit wall times {total / 60:.1f} min; this run {(time.perf_counter() - started) / 60:.1f} min")
    for dataset, values in spearman.items():
        show(*check_targets(values, dataset))
    title = f"The supervised STS table on STS-B {args.lang}, preset {args.preset}"
    harness.record(args, title, show.lines, {"rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
