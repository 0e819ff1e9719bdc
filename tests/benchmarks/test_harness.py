"""The benchmarks' harness (benchmarks/harness.py) on real files: a recorded entry's name, header and JSON, the
next one of that name on the same day, the index's table regenerated newest first, nothing without --record."""

from __future__ import annotations

import json
import subprocess
from datetime import date

from benchmarks import harness
from tests.helpers import REPO

INDEX = """# Results log

Every figure comes from an entry here.

## Entries

| date | entry | what it measured |
|---|---|---|
| 2020-01-01 | [stale](2020-01-01-stale.md) | a row of an entry that is gone |

## After the table

kept as it was
"""


def script_args(monkeypatch, tmp_path, *argv: str):
    """`benchmarks/gate_power.py ARGV` as run from the repository, parsed by the harness's options."""
    monkeypatch.setattr("sys.argv", [str(REPO / "benchmarks" / "gate_power.py"), *argv])
    parser = harness.parser("The gate's power.\n\nMore.")
    parser.add_argument("--sizes", default="50")
    return parser.parse_args(argv)


def test_a_recorded_entry_has_its_name_header_figures_and_json(monkeypatch, tmp_path):
    work = tmp_path / "work"
    args = script_args(monkeypatch, tmp_path, "--workdir", str(work), "--sizes", "50,100", "--record")
    assert harness.workdir(args) == work and work.is_dir()
    printed = harness.Lines()
    printed("## gate power: 120 queries", "| queries | P |", "|---|---|", "| 50 | 0.31 |")
    path = harness.record(
        args, "The gate's power on one night", printed.lines, {"power": {"50": 0.31}}, results=tmp_path
    )

    today = date.today().isoformat()
    assert path == tmp_path / f"{today}-gate-power.md"
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True
    ).stdout
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0] == f"# {today} · The gate's power on one night"
    assert lines[2:5] == ["| | |", "|---|---|", f"| date | {today} |"]
    assert lines[5] == f"| commit | {head.strip()}{'+dirty' if dirty.strip() else ''} |"
    assert lines[6].startswith("| machine | ") and " cores, " in lines[6] and "GiB" in lines[6]
    assert lines[7].endswith(" benchmarks/gate_power.py --workdir WORK --sizes 50,100 --record` |")  # no tmp path
    figures = text.split("## Figures\n\n")[1].split("\n\n## What was learnt\n\n")
    assert figures[0] == "### gate power: 120 queries\n\n| queries | P |\n|---|---|\n| 50 | 0.31 |"
    assert "To be written by whoever ran it" in figures[1]
    assert json.loads(path.with_suffix(".json").read_text()) == {"power": {"50": 0.31}}


def test_the_same_name_on_the_same_day_takes_the_next_number(monkeypatch, tmp_path):
    args = script_args(monkeypatch, tmp_path, "--record")
    first = harness.record(args, "once", ["a"], results=tmp_path)
    second = harness.record(args, "again", ["b"], results=tmp_path)
    third = harness.record(args, "and again", ["c"], name="gate-power", results=tmp_path)
    assert [p.name for p in (first, second, third)] == [
        f"{date.today()}-gate-power.md",
        f"{date.today()}-gate-power-2.md",
        f"{date.today()}-gate-power-3.md",
    ]
    assert not first.with_suffix(".json").exists()  # no figures' dict: no JSON
    assert second.read_text(encoding="utf-8").startswith(f"# {date.today()} · again\n")


def test_the_index_lists_every_entry_newest_first(tmp_path):
    (tmp_path / "index.md").write_text(INDEX, encoding="utf-8")
    (tmp_path / "2026-11-26-moved-by-hand.md").write_text("# An entry from before the harness\n", encoding="utf-8")
    for day, name, title in (
        (date(2026, 12, 6), "corpus-ladder", "The large rung's first night"),
        (date(2026, 12, 6), "corpus-ladder", "The same, again"),
        (date(2026, 12, 7), "gate-power", "The gate's power | suite size"),
        (date(2026, 11, 27), "gpu-suite-023302Z", "GPU suite: gpu run"),
    ):
        harness.write_entry(harness.new_entry(name, day, tmp_path), title, ["x"], None, "python benchmarks/x.py")

    text = (tmp_path / "index.md").read_text(encoding="utf-8")
    assert text.startswith("# Results log\n\nEvery figure comes from an entry here.\n\n## Entries\n\n")
    assert text.endswith("\n\n## After the table\n\nkept as it was\n")
    table = text.split("## Entries\n\n")[1].split("\n\n")[0].splitlines()
    assert table == [
        "| date | entry | what it measured |",
        "|---|---|---|",
        "| 2026-12-07 | [gate-power](2026-12-07-gate-power.md) | The gate's power \\| suite size |",
        "| 2026-12-06 | [corpus-ladder-2](2026-12-06-corpus-ladder-2.md) | The same, again |",
        "| 2026-12-06 | [corpus-ladder](2026-12-06-corpus-ladder.md) | The large rung's first night |",
        "| 2026-11-27 | [gpu-suite-023302Z](2026-11-27-gpu-suite-023302Z.md) | GPU suite: gpu run |",
        "| 2026-11-26 | [moved-by-hand](2026-11-26-moved-by-hand.md) | An entry from before the harness |",
    ]
    assert harness.regenerate_index(tmp_path).read_text(encoding="utf-8") == text  # again: the same


def test_without_record_nothing_is_written(monkeypatch, tmp_path):
    args = script_args(monkeypatch, tmp_path, "--sizes", "50")
    assert harness.record(args, "tried", ["| a |"], {"a": 1}, results=tmp_path) is None
    assert list(tmp_path.iterdir()) == []
