"""The `metrics` table schema, the markdown report and one bar chart per task.

The report lays the evaluated models side by side and, under each task, the source papers'
published numbers. Those come from other data splits, model sizes and (for most) supervised
fine-tuning: they are context for the order of magnitude, not a leaderboard to compare against.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa

REPORT_CODE_VERSION = "eval-report-v1"

METRICS_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("variant", pa.string()),
        ("dataset", pa.string()),
        ("task", pa.string()),
        ("metric", pa.string()),
        ("k", pa.int32()),
        ("value", pa.float64()),
        ("run_fingerprint", pa.string()),
        ("created_at", pa.timestamp("us", tz="UTC")),
        ("status", pa.string()),  # "ok" or "not_run" (value is NULL, never 0)
        ("detail", pa.string()),  # why not run, or notes such as dropped queries
        ("n", pa.int64()),  # queries / pairs / texts the value averages over
        ("model_spec", pa.string()),
        ("model_fingerprint", pa.string()),
        ("dataset_path", pa.string()),
    ]
)

TASK_TITLES = {
    "retrieval": "Dense retrieval (GUR): recall@100, MRR@10",
    "question_retrieval": "Question retrieval (TFCSG): P@1, P@5, P@10, MAP, MRR",
    "sts": "Semantic textual similarity: Pearson / Spearman of cosine vs gold",
    "zero_shot": "Zero-shot classification by nearest label embedding",
}

# Published numbers, for context only. `setting` says how they differ from the runs above.
PUBLISHED: list[dict] = [
    *(
        {
            "task": "question_retrieval",
            "source": "TFCSG (Shang et al.), Table 3",
            "setting": "StackOverflow 4,000-title test split; 768-d BERT/RoBERTa-base, trained on the 16k titles",
            "model": model,
            "values": dict(zip(("P@1", "P@5", "P@10", "MAP", "MRR"), values, strict=True)),
        }
        for model, values in (
            ("BERT-Base", (0.510, 0.409, 0.355, 0.542, 0.625)),
            ("SimCSE-BERT-Base", (0.727, 0.656, 0.612, 0.744, 0.767)),
            ("TFCSG-BERT-Base", (0.816, 0.814, 0.809, 0.832, 0.846)),
            ("RoBERTa-Base", (0.623, 0.541, 0.463, 0.607, 0.666)),
            ("SimCSE-RoBERTa-Base", (0.776, 0.714, 0.684, 0.809, 0.838)),
            ("TFCSG-RoBERTa-Base", (0.832, 0.822, 0.812, 0.854, 0.882)),
        )
    ),
    *(
        {
            "task": "question_retrieval",
            "source": "research note (shared/research/data_models.md)",
            "setting": "1,000 sampled queries vs the other 19,999 titles (train + test)",
            "model": model,
            "values": dict(zip(("P@1", "P@5", "P@10", "MAP", "MRR"), values, strict=True)),
        }
        for model, values in (
            ("BM25", (0.626, 0.587, 0.563, 0.322, 0.739)),
            ("all-MiniLM-L6-v2", (0.824, 0.794, 0.775, 0.546, 0.877)),
            ("random-init BERT 6L/384", (0.646, 0.588, 0.555, 0.172, 0.736)),
        )
    ),
    *(
        {
            "task": "sts",
            "source": "STS survey (paper 003), final table",
            "setting": "STS-B; word vectors unsupervised, transformers fine-tuned on STS-B train",
            "model": model,
            "values": {"pearson": p, "spearman": s},
        }
        for model, p, s in (
            ("Word2Vec-Pretrained", 0.347, 0.325),
            ("GloVe-Pretrained", 0.237, 0.274),
            ("Word2Vec-SG", 0.472, 0.475),
            ("Word2Vec-CBOW", 0.262, 0.259),
            ("InferSent", 0.776, 0.785),
            ("BERT", 0.902, 0.898),
            ("S-BERT", 0.875, 0.868),
        )
    ),
    *(
        {
            "task": "sts",
            "source": "research note (shared/research/data_models.md)",
            "setting": setting,
            "model": model,
            "values": {"pearson": p, "spearman": s},
        }
        for setting, model, p, s in (
            ("STS-B test, English", "all-MiniLM-L6-v2", 0.827, 0.820),
            ("STS-B test, Chinese (MT)", "all-MiniLM-L6-v2", 0.376, 0.397),
            ("Lee-50", "all-MiniLM-L6-v2", 0.656, 0.508),
            ("Lee-50", "GloVe-50d mean", 0.386, 0.413),
            ("Lee-50", "random-init BERT 6L/384", 0.138, 0.100),
        )
    ),
]

NO_PUBLISHED_NUMBERS = {
    "retrieval": "GUR reports recall@100 and MRR@10 only as charts (Figures 6-7) on private Chinese retrieval "
    "tasks; no numbers to copy.",
    "zero_shot": "GUR reports zero-shot accuracy only as a chart (Figure 8) on private multi-class tasks; "
    "no numbers to copy.",
}


CAVEATS = {
    "question_retrieval": "Here MAP and MRR rank all other titles (about 800 relevant ones per query), so MAP sits "
    "well below P@10; TFCSG's MAP exceeds its P@10, so it uses another cut-off or normalisation: compare P@k and "
    "MRR only. A word2vec trained on the StackOverflow titles has seen the evaluation texts (not their tags).",
    "zero_shot": "Labels are the tag names; BM25 predicts no label for a title sharing no word with any tag (a miss).",
}


def metric_label(metric: str, k: int | None) -> str:
    names = {"precision": "P", "recall": "recall", "mrr": "MRR", "map": "MAP", "ndcg": "nDCG"}
    base = names.get(metric, metric)
    return f"{base}@{k}" if k is not None else base


def _fmt(row: dict) -> str:
    if row["status"] != "ok":
        return "not run"
    value = row["value"]
    return "n/a" if value is None or math.isnan(value) else f"{value:.3f}"


def _ordered(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def render_report(rows: list[dict], charts: dict[str, str] | None = None, title: str = "Evaluation") -> str:
    """Markdown: per task, one table per dataset (models x metrics), then published numbers."""
    charts = charts or {}
    lines = [f"# {title}", ""]
    tasks = [t for t in TASK_TITLES if any(r["task"] == t for r in rows)]
    for task in tasks:
        lines += [f"## {TASK_TITLES[task]}", ""]
        task_rows = [r for r in rows if r["task"] == task]
        for dataset in _ordered(r["dataset"] for r in task_rows):
            ds_rows = [r for r in task_rows if r["dataset"] == dataset]
            metrics = _ordered(metric_label(r["metric"], r["k"]) for r in ds_rows)
            n = max((r["n"] or 0 for r in ds_rows), default=0)
            lines += [f"**{dataset}**" + (f" ({n:,} items)" if n else ""), ""]
            lines += ["| model | variant | " + " | ".join(metrics) + " |", "|---|---|" + "---:|" * len(metrics)]
            details = []
            for model, variant in _ordered((r["model"], r["variant"]) for r in ds_rows):
                cells = {
                    metric_label(r["metric"], r["k"]): r
                    for r in ds_rows
                    if (r["model"], r["variant"]) == (model, variant)
                }
                lines.append(
                    f"| {model} | {variant} | "
                    + " | ".join(_fmt(cells[m]) if m in cells else "–" for m in metrics)
                    + " |"
                )
                details += sorted({c["detail"] for c in cells.values() if c.get("detail")})
            lines.append("")
            lines += [f"- {d}" for d in _ordered(details)] + ([""] if details else [])
        if task in charts:
            lines += [f"![{task}]({charts[task]})", ""]
        lines += _published_section(task)
        if task in CAVEATS:
            lines += [f"*Note:* {CAVEATS[task]}", ""]
    return "\n".join(lines).rstrip() + "\n"


def _published_section(task: str) -> list[str]:
    entries = [p for p in PUBLISHED if p["task"] == task]
    if not entries:
        note = NO_PUBLISHED_NUMBERS.get(task)
        return [f"*Published numbers:* {note}", ""] if note else []
    lines = ["*Published numbers, for context (different splits, model sizes, training):*", ""]
    metrics = _ordered(m for p in entries for m in p["values"])
    lines += ["| source | setting | model | " + " | ".join(metrics) + " |", "|---|---|---|" + "---:|" * len(metrics)]
    for p in entries:
        cells = " | ".join(f"{p['values'][m]:.3f}" if m in p["values"] else "–" for m in metrics)
        lines.append(f"| {p['source']} | {p['setting']} | {p['model']} | {cells} |")
    return lines + [""]


def plot_charts(rows: list[dict], out_dir: Path) -> dict[str, str]:
    """One grouped bar chart per task (groups: dataset and metric; bars: models); returns task -> file name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out_dir.mkdir(parents=True, exist_ok=True)
    charts: dict[str, str] = {}
    for task in TASK_TITLES:
        ok = [r for r in rows if r["task"] == task and r["status"] == "ok" and r["value"] is not None]
        ok = [r for r in ok if not math.isnan(r["value"])]
        if not ok:
            continue
        datasets = _ordered(r["dataset"] for r in ok)

        def group(r: dict, single: bool = len(datasets) == 1) -> str:
            label = metric_label(r["metric"], r["k"])
            return label if single else f"{r['dataset']}\n{label}"

        def model_of(r: dict) -> str:
            return f"{r['model']} ({r['variant']})" if r["variant"] else r["model"]

        groups = _ordered(group(r) for r in ok)
        models = _ordered(model_of(r) for r in ok)
        width = 0.8 / len(models)
        fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(groups) + 1.5), 4.5))
        x = np.arange(len(groups))
        for i, model in enumerate(models):
            values = {group(r): r["value"] for r in ok if model_of(r) == model}
            heights = [values.get(g, np.nan) for g in groups]
            ax.bar(x + (i - (len(models) - 1) / 2) * width, heights, width, label=model)
        ax.set_xticks(x, groups, fontsize=8)
        ax.set_ylim(min(0.0, min(r["value"] for r in ok)), 1.0)
        title = TASK_TITLES[task].split(":")[0]
        ax.set_title(f"{title}: {datasets[0]}" if len(datasets) == 1 else title, fontsize=10)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
        ax.grid(axis="y", alpha=0.3)
        name = f"{task}.png"
        fig.savefig(out_dir / name, dpi=110, bbox_inches="tight")
        plt.close(fig)
        charts[task] = name
    return charts
