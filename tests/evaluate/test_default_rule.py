"""The rule that picks TFCSG's default on the dev split (`benchmarks/quality.py::choose_default`)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from quality import choose_default, train_seconds  # noqa: E402


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


def test_a_mixed_run_counts_its_unmixed_training_once(tmp_path):
    import json

    def manifest(path: str, started: float, finished: float, **extra) -> dict:
        m = {"started_at": started, "finished_at": finished, "timings": {"total_s": finished - started}, **extra}
        (tmp_path / path).mkdir()
        (tmp_path / path / "_manifest.json").write_text(json.dumps(m))
        return m

    manifest("unmixed", 100.0, 900.0)
    trained_inside = manifest("mixed", 99.0, 905.0, unmixed={"path": "unmixed"})
    assert train_seconds(tmp_path, trained_inside) == 806.0  # one call trained both: its own time holds both
    reused = manifest("mixed-later", 2000.0, 2004.0, unmixed={"path": "unmixed"})
    assert train_seconds(tmp_path, reused) == 804.0  # the mix's seconds plus the earlier training
    assert train_seconds(tmp_path, {"timings": {"total_s": 12.5}}) == 12.5
