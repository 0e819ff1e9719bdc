"""The rule that picks TFCSG's default on the dev split (`benchmarks/quality.py::choose_default`)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from quality import choose_default  # noqa: E402


def row(p1: float, sts: float) -> dict:
    return {"runs": [{"scores": {"P@1": p1, "STS-B": sts}}]}


def test_best_allowed_p1_replaces_the_default_only_with_a_gain_of_at_least_a_hundredth():
    dev = {"minilm": row(0.78, 0.867), "tfcsg": row(0.86, 0.862), "a": row(0.875, 0.858), "b": row(0.90, 0.85)}
    assert choose_default(dev)[0] == "a"  # b is over the STS-B allowance (.867 - .01)
    dev["a"] = row(0.865, 0.858)
    picked, why = choose_default(dev)
    assert picked == "tfcsg" and "gains +0.005 (< .01)" in why


def test_a_row_from_another_start_is_never_the_pick():
    dev = {
        "minilm": row(0.78, 0.867),
        "mpnet": row(0.80, 0.88),
        "tfcsg": row(0.86, 0.862),
        "tfcsg from mpnet": row(0.95, 0.875),  # better on both axes, but the start is the user's choice
        "tfcsg, bf16": row(0.861, 0.862),
    }
    assert choose_default(dev)[0] == "tfcsg"
