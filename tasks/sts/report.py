"""The supervised STS report: the survey's table layout, its published figures beside ours, one chart.

Published figures: the survey in `../shared/papers/003_*` (final table; STS-B, MSE on score / 5,
Pearson, Spearman; BERT/ALBERT/RoBERTa base models and Qwen2.5-0.5B on a GPU, 50 epochs for
the siamese rows). Ours differ in model size (MiniLM, SmolLM2-135M) and, with the cpu preset,
in epochs and subsamples: the column is context, not a target.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

# The survey's final table: row -> (MSE, Pearson, Spearman).
SURVEY = {
    "Word2Vec-Pretrained": (0.143, 0.347, 0.325),
    "GloVe-Pretrained": (0.191, 0.237, 0.274),
    "Word2Vec-SG": (0.162, 0.472, 0.475),
    "Word2Vec-CBOW": (0.150, 0.262, 0.259),
    "GloVe": (0.196, 0.240, 0.239),
    "RNN": (0.157, 0.212, 0.216),
    "LSTM": (0.131, 0.348, 0.352),
    "LSTM-Pretrained": (0.053, 0.685, 0.688),
    "GRU": (0.081, 0.531, 0.529),
    "InferSent": (0.042, 0.776, 0.785),
    "BERT": (0.017, 0.902, 0.898),
    "ALBERT": (0.019, 0.886, 0.885),
    "RoBERTa": (0.016, 0.914, 0.912),
    "BERT (MLP+sigmoid)": (0.018, 0.899, 0.896),
    "ALBERT (MLP+sigmoid)": (0.024, 0.860, 0.858),
    "RoBERTa (MLP+sigmoid)": (0.015, 0.916, 0.915),
    "S-BERT": (0.034, 0.875, 0.868),
    "S-LLM (SFT)": (0.087, 0.871, 0.869),
    "S-LLM (LoRA)": (0.092, 0.921, 0.903),
}
METRICS = ("mse", "pearson", "spearman")


def summarise(rows: list[dict]) -> list[dict]:
    """One entry per (model, dataset): mean and sd of each metric over seeds, in first-seen order."""
    groups: dict[tuple[str, str], dict] = {}
    values: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        key = (r["model"], r["dataset"])
        groups.setdefault(key, {"model": r["model"], "dataset": r["dataset"], "spec": r["model_spec"], "runs": set()})
        groups[key]["runs"].add(r["run_fingerprint"])
        groups[key]["detail"] = r["detail"]
        groups[key]["variant"] = r["variant"]
        values[key][r["metric"]].append(r["value"])
    out = []
    for key, g in groups.items():
        for metric in METRICS:
            v = values[key][metric]
            g[metric] = statistics.fmean(v)
            g[f"{metric}_sd"] = statistics.stdev(v) if len(v) > 1 else None
        g["seeds"] = len(g.pop("runs"))
        out.append(g)
    return out


def survey_row(spec: str) -> str | None:
    from tasks.sts.families import parse_family

    try:
        return parse_family(spec).survey_row
    except (ValueError, FileNotFoundError):
        return None


def _cell(entry: dict, metric: str) -> str:
    sd = entry[f"{metric}_sd"]
    return f"{entry[metric]:.3f}" + (f" ± {sd:.3f}" if sd is not None else "")


def render_sts_report(rows: list[dict], unit_seconds: dict[str, float], chart: str | None = None) -> str:
    """Markdown: per dataset, our rows (mean ± sd over seeds) beside the survey's row they match."""
    seconds: dict[tuple[str, str], float] = defaultdict(float)
    for r in {(r["model"], r["dataset"], r["run_fingerprint"]) for r in rows}:
        seconds[r[:2]] += unit_seconds.get(r[2], 0.0)
    lines = ["# Supervised STS (the survey's families)", ""]
    lines += [
        "MSE on score / 5, Pearson and Spearman of the prediction vs gold; mean ± sd over seeds.",
        "Survey: its final table (STS-B; base-size BERT/RoBERTa, Qwen2.5-0.5B, GPU, up to 50 epochs).",
        "",
    ]
    by_dataset: dict[str, list[dict]] = defaultdict(list)
    for entry in summarise(rows):
        by_dataset[entry["dataset"]].append(entry)
    for dataset, entries in by_dataset.items():
        lines += [f"## {dataset}", ""]
        lines += [
            "| family | settings | MSE | Pearson | Spearman | seeds | wall s "
            "| survey row | survey MSE | Pearson | Spearman |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for e in entries:
            row = survey_row(e["spec"])
            published = SURVEY.get(row) if row else None
            survey = " | ".join(f"{v:.3f}" for v in published) if published else "| |"
            lines.append(
                f"| {e['model']} | {e['variant']} | {_cell(e, 'mse')} | {_cell(e, 'pearson')} "
                f"| {_cell(e, 'spearman')} | {e['seeds']} | {seconds[(e['model'], dataset)]:.0f} "
                f"| {row or ''} | {survey} |"
            )
        notes = [f"- {e['model']}: {e['detail']}" for e in entries if e.get("detail")]
        lines += ["", *notes, ""]
    if chart:
        lines += [f"![Spearman by family]({chart})", ""]
    return "\n".join(lines)


def plot_sts(rows: list[dict], path: Path) -> Path:
    """Horizontal bars: our Spearman per family and dataset, the survey's matching row in grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries = summarise(rows)
    datasets = list(dict.fromkeys(e["dataset"] for e in entries))
    models = list(dict.fromkeys(e["model"] for e in entries))
    height = 0.8 / (len(datasets) + 1)
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(models) + 1.5))
    for d, dataset in enumerate(datasets):
        got = {e["model"]: e["spearman"] for e in entries if e["dataset"] == dataset}
        ys = [i + d * height for i, m in enumerate(models) if m in got]
        ax.barh(ys, [got[m] for m in models if m in got], height=height, label=dataset)
    specs = {e["model"]: e["spec"] for e in entries}
    survey = [(i, SURVEY[r][2]) for i, m in enumerate(models) if (r := survey_row(specs[m])) in SURVEY]
    if survey:
        ax.barh(
            [i + len(datasets) * height for i, _ in survey],
            [v for _, v in survey],
            height=height,
            color="0.7",
            label="survey (published)",
        )
    ax.set_yticks([i + height * len(datasets) / 2 for i in range(len(models))], models)
    ax.invert_yaxis()
    ax.set_xlabel("Spearman")
    ax.set_xlim(min(0.0, min((e["spearman"] for e in entries), default=0.0)), 1.0)
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
