"""The baseline figures: every baseline on every evaluation set, through the `evaluate` flow.

    .venv/bin/python benchmarks/eval_baselines.py                        # all 16,000 StackOverflow queries
    .venv/bin/python benchmarks/eval_baselines.py --question-queries 1000 --only-stackoverflow

Baselines: BM25, all-MiniLM-L6-v2, the same architecture untrained (seed 0), GloVe-50d mean, and
word2vec means trained on the demo Wikipedia sample and on the StackOverflow titles themselves
(unlabelled, as TFCSG uses them). Sets: StackOverflow train titles (question retrieval and
zero-shot), STS-B dev en and zh, Lee-50, and the held-out demo retrieval set. Prints the report;
the `metrics` rows land in the data root's catalog.
"""

from __future__ import annotations

import time
from pathlib import Path

import harness

from flows.evaluate import evaluate
from flows.parameters import STACKOVERFLOW

MODELS = ["bm25", "minilm", "untrained", "glove", "word2vec", f"word2vec:{STACKOVERFLOW}#title"]


def main() -> int:
    parser = harness.parser(__doc__, workdir=None)
    parser.add_argument("--root", default=None, help="data root (default: $GUR_HOME or ./data)")
    parser.add_argument("--question-queries", type=int, default=0, help="sampled StackOverflow queries (0: all)")
    parser.add_argument("--only-stackoverflow", action="store_true", help="skip STS, Lee-50 and the demo set")
    parser.add_argument("--models", nargs="+", default=MODELS)
    args = parser.parse_args()
    started = time.monotonic()
    only = args.only_stackoverflow
    result = evaluate(
        models=args.models,
        stsb=[] if only else None,
        lee=not only,
        demo_retrieval=not only,
        question_queries=args.question_queries,
        root=args.root,
    )
    report = Path(result["report"]).read_text(encoding="utf-8")
    print(report)
    print(f"report: {result['report']}  ({time.monotonic() - started:.0f} s)")
    queries = f"{args.question_queries:,} sampled" if args.question_queries else "all"
    title = f"Every baseline on {'StackOverflow only' if only else 'every set'} ({queries} StackOverflow queries)"
    lines = [line for line in report.splitlines() if not line.startswith("![")]  # its charts stay in the data root
    harness.record(args, title, lines, figures(result, args.root))
    return 0


def figures(result: dict, root: str | None) -> dict:
    """The metrics rows the run wrote: {model: {dataset/task/metric@k: value}}."""
    import pyarrow.parquet as pq

    from storage.layout import data_root
    from storage.stage_output import ref_dir

    folder = ref_dir(data_root(root), result["metrics"])
    rows = [r for part in sorted(folder.glob("part-*.parquet")) for r in pq.read_table(part).to_pylist()]
    table: dict[str, dict[str, float | None]] = {}
    for r in rows:
        table.setdefault(r["model"], {})[f"{r['dataset']}/{r['task']}/{r['metric']}@{r['k']}"] = r["value"]
    return {"metrics": table}


if __name__ == "__main__":
    raise SystemExit(main())
