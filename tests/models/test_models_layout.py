"""models/ is one package per family (gur, tfcsg, documents, sts) over the training loop and two shared modules:
the moves kept every run's fingerprint, and no package imports one above it (the loop imports no family)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

MODELS = Path(__file__).resolve().parents[2] / "models"
SOURCE = {"fingerprint": "0123456789abcdef"}
# What the flat layout (commit 90ef65a) computed for these calls: a change here means every trained run, STS
# unit and nightly history would be recomputed.
BEFORE_THE_MOVE = {
    "gur": "3f42e1deea406b8b",
    "tfcsg-cpu": "e69f7e109598c003",
    "tfcsg-paper": "2446e83e8310f137",
    "simcse-cpu": "31dbc730d0eeed2f",
    "sts-unit-lstm": "30b9af46f87d9ef2",
}
# A package may import only packages on a lower rank (the shared modules are rank 0); models/ never imports
# the stages, flows or the CLI above it. The training loop sits under the families: each family's recipe.py
# imports it, and it loads a recipe module by name.
RANK = {"encoders": 0, "word2vec": 0, "training": 1, "gur": 2, "tfcsg": 3, "documents": 4, "sts": 5}


def computed_fingerprints(tmp_path: Path) -> dict[str, str]:
    from models.training.presets import question_config
    from storage.fingerprint import fingerprint
    from tasks.sts.families import parse_family
    from tasks.sts.task import STS_CODE_VERSION, StsFiles, unit_identity
    from tasks.train.task import train_fingerprint

    train = tmp_path / "train.csv"
    dev = tmp_path / "dev.csv"
    for path in (train, dev):
        path.write_text("score,sentence1,sentence2\n4.0,a cat sits,a cat is sitting\n0.5,a cat sits,rain falls\n")
    files = StsFiles(lang="en", train=str(train), dev=str(dev))
    identity = unit_identity(parse_family("lstm"), files, 0, "cpu", None, tmp_path)
    return {
        "gur": train_fingerprint(SOURCE, {}),
        "tfcsg-cpu": train_fingerprint(SOURCE, question_config("tfcsg", "cpu", {})),
        "tfcsg-paper": train_fingerprint(SOURCE, question_config("tfcsg", "paper", {})),
        "simcse-cpu": train_fingerprint(SOURCE, question_config("simcse", "cpu", {})),
        "sts-unit-lstm": fingerprint("sts-unit", STS_CODE_VERSION, identity),
    }


def test_fingerprints_are_those_of_the_flat_layout(tmp_path):
    assert computed_fingerprints(tmp_path) == BEFORE_THE_MOVE


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def family(path: Path) -> str:
    rel = path.relative_to(MODELS)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


@pytest.mark.parametrize("path", sorted(MODELS.rglob("*.py")), ids=lambda p: str(p.relative_to(MODELS)))
def test_no_import_runs_up_a_layer(path):
    if path.name == "__init__.py" and path.parent == MODELS:
        return
    own = family(path)
    assert own in RANK, f"{path}: models/ holds the family packages {sorted(RANK)} and nothing else"
    for name in imported_modules(path):
        top, _, rest = name.partition(".")
        assert top not in {"tasks", "flows", "cli", "deployments"}, f"{path} imports {name}: models/ is below them"
        if top == "models" and rest:
            other = rest.split(".")[0]
            assert other == own or RANK[other] < RANK[own], f"{path} ({own}) imports {name} ({other}), a higher layer"
