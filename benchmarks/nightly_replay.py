"""A nightly TFCSG candidate on a grown corpus: the new questions plus a replay sample, against the full corpus.

    .venv/bin/python benchmarks/nightly_replay.py [--titles 4000] [--growth 0.05] [--replay 1.0]

StackOverflow titles (the shared data, `--titles` of them spread over the 20 tags); a seeded
hash-based 20% is held out for scoring (the nightly gate's rule, `tasks/nightly/holdout.py`) and
never trained on. Night 0: the corpus folder holds the first `1 - growth` share of the training
titles; keywords are mined and a champion is trained from MiniLM (the `cpu` preset: one epoch).
Night 1: a file with the remaining titles lands; keywords are mined again (warm-started from night
0's fit), and two candidates are warm-started from the champion, each for one epoch of its data:
- `full`: every training title (what a night does by default);
- `replay`: the titles new tonight plus a seeded sample of the older ones, `--replay` times as many
  (`[train] replay` in nightly.toml; TrainConfig.replay_since / replay_ratio).
Reported per model: question retrieval on the held-out titles (P@1, MAP, MRR), STS-B en dev Spearman,
rows trained on, and the training run's wall time (2 shared cores: compare within one run).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import harness
import numpy as np
from harness import shared_data


def titles(n: int) -> list[dict]:
    with open(shared_data("stackoverflow", "train.tsv"), encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return rows[:: max(1, len(rows) // n)][:n]


def write(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, delimiter="\t", lineterminator="\n").writerows(
            [["id", "title"], *([r["id"], r["title"]] for r in rows)]
        )
    return path


def score(model: str, held: list[dict]) -> dict[str, float]:
    from tasks.evaluate.data import LabelledTexts, load_stsb
    from tasks.evaluate.models import resolve_model
    from tasks.evaluate.scoring import question_retrieval, sts

    names = sorted({r["tag"] for r in held})
    scored = LabelledTexts(
        "stackoverflow-held-out", [r["title"] for r in held], np.array([names.index(r["tag"]) for r in held]), names
    )
    encoder = resolve_model(model)
    values = {}
    for m in question_retrieval(encoder, scored):
        values[{"precision": f"P@{m.k}", "map": "MAP", "mrr": "MRR"}.get(m.metric, m.metric)] = m.value
    dev = load_stsb(shared_data("stsb", "stsb-en-dev.csv"))
    values["STS-B dev"] = next(m.value for m in sts(encoder, dev) if m.metric == "spearman")
    return {k: v for k, v in values.items() if k in ("P@1", "MAP", "MRR", "STS-B dev")}


def main() -> None:
    from flows.mine_keywords import mine_keywords
    from flows.train import train_flow
    from models.encoders import minilm_path
    from tasks.nightly.holdout import held_out

    parser = harness.parser(__doc__, workdir_help="the corpus folder and the data root")
    parser.add_argument("--titles", type=int, default=4000)
    parser.add_argument(
        "--growth", type=float, default=0.05, help="share of the training titles that arrive on night 1"
    )
    parser.add_argument("--replay", type=float, default=1.0, help="old titles replayed per new title")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    work, show = harness.workdir(args), harness.Lines()
    corpus, root = work / "corpus", work / "data"
    rows = titles(args.titles)
    held = [r for r in rows if held_out(r["title"], 0.2, 0)]
    train_rows = [r for r in rows if not held_out(r["title"], 0.2, 0)]
    cut = round(len(train_rows) * (1 - args.growth))
    show(
        f"{len(train_rows)} training titles ({cut} on night 0, {len(train_rows) - cut} new on night 1), "
        f"{len(held)} held out for scoring"
    )
    write(corpus / "night0.tsv", train_rows[:cut])
    kw = dict(text_field="title", title_field="", warm_start=True, root=str(root))
    # the recipe its entry (docs/results/2026-11-25-nightly-replay-candidate.md) was measured with: the `cpu`
    # preset before the mix (s2s weight 2)
    options = {"seed": args.seed, "s2s_weight": 2.0, "interpolate": 1.0}

    from prefect.testing.utilities import prefect_test_harness

    results = {}
    with prefect_test_harness(server_startup_timeout=120):
        first = mine_keywords(input_path=str(corpus), **kw)
        champion = train_flow(
            method="tfcsg",
            preset="cpu",
            keywords=first["fingerprint"],
            init_from=str(minilm_path()),
            options=options,
            root=str(root),
        )
        results["champion (night 0)"] = champion
        write(corpus / "night1.tsv", train_rows[cut:])
        second = mine_keywords(input_path=str(corpus), **kw)
        export = str(root / champion["path"] / "export")
        for name, extra in (
            ("candidate: full corpus", {}),
            (
                f"candidate: new + replay x{args.replay:g}",
                {"replay_since": first["fingerprint"], "replay_ratio": args.replay},
            ),
        ):
            ref = train_flow(
                method="tfcsg",
                preset="cpu",
                keywords=second["fingerprint"],
                init_from=export,
                options={**options, **extra},
                root=str(root),
            )
            results[name] = ref
    lines = ["| model | rows trained on | train s | P@1 | MAP | MRR | STS-B dev |", "|---|---|---|---|---|---|---|"]
    base = score(str(minilm_path()), held)
    cells = " | ".join(f"{base[c]:.3f}" for c in ("P@1", "MAP", "MRR", "STS-B dev"))
    lines.append(f"| MiniLM (start) | - | - | {cells} |")
    figures = {"MiniLM (start)": base}
    for name, ref in results.items():
        manifest = json.loads((root / ref["path"] / "_manifest.json").read_text())
        s = score(str(root / ref["path"] / "export"), held)
        rows_used = manifest["rows"].get("train_rows")
        train_s = manifest["timings"]["total_s"] + (manifest.get("unmixed_total_s") or 0.0)  # a mix: + its training
        lines.append(
            f"| {name} | {rows_used} | {train_s:.0f} | {s['P@1']:.3f} | {s['MAP']:.3f} "
            f"| {s['MRR']:.3f} | {s['STS-B dev']:.3f} |"
        )
        figures[name] = {**s, "rows_trained_on": rows_used, "train_s": train_s}
    show(*lines)
    title = f"A TFCSG candidate on new titles plus replay x{args.replay:g} against the full corpus"
    harness.record(args, title, show.lines, figures)


if __name__ == "__main__":
    main()
