"""How many held-out queries the gate's paired test needs: its power against suite size, from a real night.

    .venv/bin/python benchmarks/gate_power.py --root WORK/python-docs/data
    .venv/bin/python benchmarks/gate_power.py --root R --sizes 100,250,500,1000,2000 --gains 0.02,0.03,0.05

Reads a night's decision (`<root>/models/promotions`, the newest row with a candidate) and the per-query
values of its primary metric for the candidate and the model it was judged against (the evaluation units'
`queries.parquet`): d = candidate - champion per query. For each suite size n and true gain g, a suite is
drawn `--trials` times as n queries with replacement from d shifted to mean g (the night's spread of per-query
gains, around another mean), and the gate's own test (`tasks/nightly/significance.py: paired_test`) is run on
it: the share of trials whose interval lies above 0 is the power to promote a candidate that is g better, and
at g = 0 the share that promotes is the false-promotion rate. Also printed: the night's own gain, the
standard deviation of d, and the half-width of the 95% interval that a suite of n queries gives.
"""

from __future__ import annotations

from pathlib import Path

import harness
import numpy as np


def night_gains(root: Path) -> tuple[np.ndarray, dict]:
    """Per-query candidate - champion on the newest decision's primary metric."""
    import pyarrow.parquet as pq

    rows = [r for r in pq.read_table(root / "models" / "promotions").to_pylist() if r["candidate"]]
    if not rows:
        raise SystemExit(f"{root}: no decision with a candidate in models/promotions")
    row = max(rows, key=lambda r: r["created_at"])
    dataset, task, metric_k = row["primary_metric"].split("/")
    metric, k = metric_k.split("@")
    values: dict[str, np.ndarray] = {}
    for part in sorted((root / "eval-unit").glob("*/part-00000.parquet")):
        table = [
            r
            for r in pq.read_table(part).to_pylist()
            if (r["dataset"], r["task"], r["metric"], r["k"]) == (dataset, task, metric, int(k))
        ]
        queries = part.parent / "queries.parquet"
        if not table or not queries.exists():
            continue
        spec = table[0]["model_spec"]
        q = [r for r in pq.read_table(queries).to_pylist() if (r["metric"], r["k"]) == (metric, int(k))]
        values[spec] = np.array([r["value"] for r in sorted(q, key=lambda r: r["query"])])
    missing = [m for m in (row["candidate"], row["champion"]) if m not in values]
    if missing:
        raise SystemExit(f"{root}: no per-query {row['primary_metric']} for {missing} under eval-unit/")
    return values[row["candidate"]] - values[row["champion"]], row


def main() -> None:
    parser = harness.parser(__doc__, workdir=None)
    parser.add_argument("--root", type=Path, required=True, help="a data root that ran a night")
    parser.add_argument("--sizes", default="50,100,250,500,1000,2000")
    parser.add_argument("--gains", default="0,0.02,0.03,0.05")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--resamples", type=int, default=2000, help="the test's bootstrap and permutation draws")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from tasks.nightly.significance import paired_test

    d, row = night_gains(args.root)
    sizes = [int(x) for x in args.sizes.split(",")]
    gains = [float(x) for x in args.gains.split(",")]
    sd = float(d.std(ddof=1))
    show = harness.Lines()
    show(
        f"## gate power: {row['primary_metric']} of {row['candidate']} against {row['champion']}: {len(d)} queries, "
        f"gain {d.mean():+.4f}, sd of the per-query gain {sd:.3f}; {args.trials} suites per cell"
    )
    show(
        "| queries | 95% half-width (1.96 sd / sqrt n) | "
        + " | ".join(f"P(promote), gain {g:+.2f}" for g in gains)
        + " |",
        "|---|---|" + "---|" * len(gains),
    )
    rng = np.random.default_rng(args.seed)
    centred = d - d.mean()
    power: dict[int, dict[float, float]] = {}
    for n in sizes:
        cells = []
        for g in gains:
            promoted = 0
            for _ in range(args.trials):
                sample = rng.choice(centred + g, size=n, replace=True)
                test = paired_test(sample, np.zeros(n), 0.95, args.resamples, int(rng.integers(1 << 31)))
                promoted += test.low > 0
            cells.append(f"{promoted / args.trials:.2f}")
            power.setdefault(n, {})[g] = promoted / args.trials
        show(f"| {n:,} | {1.96 * sd / np.sqrt(n):.4f} | " + " | ".join(cells) + " |")
    figures = {"metric": row["primary_metric"], "queries": len(d), "gain": float(d.mean()), "sd": sd, "power": power}
    harness.record(args, f"The gate's power against suite size ({row['primary_metric']})", show.lines, figures)


if __name__ == "__main__":
    main()
