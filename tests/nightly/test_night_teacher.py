"""`[train] teacher`: resolved into the candidate's options (documents only), said in a line, in the plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.nightly.budget import Rates, Work, plan_night
from tasks.nightly.config import TrainSection
from tasks.nightly.teacher import resolve_teacher, teacher_name


def model_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "my-teacher"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    return folder


def test_a_folder_goes_into_the_documents_options_and_nothing_else_changes_without_one(tmp_path, capsys):
    folder = model_folder(tmp_path)
    none = TrainSection(method="documents", options={"lr": 3e-5})
    assert resolve_teacher(none, tmp_path) == none  # no teacher: the same section, the same fingerprint
    got = resolve_teacher(TrainSection(method="documents", teacher=str(folder), options={"lr": 3e-5}), tmp_path)
    assert got.options == {"lr": 3e-5, "teacher": str(folder)} and got.teacher == ""
    assert "teacher my-teacher: the candidate learns its scores" in capsys.readouterr().out


def test_another_method_says_auto_is_unused_and_refuses_a_named_folder(tmp_path, capsys):
    got = resolve_teacher(TrainSection(method="tfcsg", teacher="auto"), tmp_path)
    assert got.teacher == "" and "teacher" not in got.options
    assert "not used (tfcsg distils no teacher)" in capsys.readouterr().out
    with pytest.raises(ValueError, match="documents recipe only"):
        resolve_teacher(TrainSection(method="tfcsg", teacher=str(model_folder(tmp_path))), tmp_path)
    with pytest.raises(ValueError, match="not a model folder"):
        resolve_teacher(TrainSection(method="documents", teacher=str(tmp_path / "missing")), tmp_path)


def test_the_plan_names_the_teacher_and_a_plan_without_one_does_not():
    rates = Rates(train_step_s=17.4)
    with_teacher = plan_night(
        3600, 60, Work(steps=98, suite_docs=600, corpus_docs=3000, teacher="all-mpnet-base-v2"), rates
    )
    lines = "\n".join(with_teacher.lines())
    assert "plan: teacher all-mpnet-base-v2 scores every training batch" in lines and "17.4 s" in lines
    assert '"teacher": "all-mpnet-base-v2"' in with_teacher.record()
    plain = plan_night(3600, 60, Work(steps=98, suite_docs=600, corpus_docs=3000), rates)
    assert "teacher" not in "\n".join(plain.lines())
    assert teacher_name("/root/sts-llm/abc/model") == "all-mpnet-base-v2" and teacher_name("/x/e5-base") == "e5-base"
