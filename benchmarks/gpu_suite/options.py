"""The suite's options (the command's `--help`); the harness reads their defaults to write rerun commands."""

from __future__ import annotations

import argparse

from harness import shared_data

import gpu_suite
from gpu_suite.settings import PARTS, START_MODELS


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=gpu_suite.__doc__.split("\n")[0])
    p.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS, help="parts to run (default: all)")
    p.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU, the same code path (< 3 min)")
    p.add_argument("--out", default="", help="results folder (default: docs/results/; --smoke: a temp folder)")
    p.add_argument("--work", default="", help="data root and runs (default: /tmp/gur-gpu-suite; --smoke: OUT/work)")
    p.add_argument("--budget-scale", type=float, default=1.0, help="multiply every time budget (a slower card: 2)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's; --smoke: 1)")
    p.add_argument("--workers", type=int, default=None, help="data stage processes (default: all cores; --smoke: 1)")
    p.add_argument("--stackoverflow", default=str(shared_data("stackoverflow", "train.tsv")), help="titles TSV")
    p.add_argument("--stsb-train", default=str(shared_data("stsb", "stsb-en-train.csv")), help="STS-B train CSV")
    p.add_argument("--stsb-dev", default=str(shared_data("stsb", "stsb-en-dev.csv")), help="STS-B dev CSV")
    p.add_argument(
        "--corpus",
        default="auto",
        help="GUR from scratch: a Sphinx HTML folder or a MediaWiki dump (default: python3-doc's HTML if installed "
        "under /usr/share/doc/python3*/html, else the demo's Wikipedia sample)",
    )
    p.add_argument(
        "--compiled-only",
        action="store_true",
        help="throughput: the torch.compile rows only (the first window measured the others: docs/gpu.md)",
    )
    p.add_argument(
        "--mpnet", default="auto", help="all-mpnet-base-v2 folder (default: from `./run.sh mpnet`'s wheels)"
    )
    p.add_argument(
        "--tfcsg-starts",
        nargs="+",
        default=list(START_MODELS),
        choices=START_MODELS,
        help="tfcsg: the start encoders (default: both; `mpnet` alone gives it the whole part and its dev P@1)",
    )
    return p
