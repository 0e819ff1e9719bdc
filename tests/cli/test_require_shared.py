"""`require_shared`: a test whose shared-data file is missing skips on a laptop and fails under CI."""

from __future__ import annotations

import pytest

from tests.helpers.shared_data import in_ci, require_shared


@pytest.mark.parametrize(("value", "ci"), [("true", True), ("1", True), ("", False), ("false", False), ("0", False)])
def test_ci_is_read_from_the_environment(monkeypatch, value, ci):
    monkeypatch.setenv("CI", value)
    assert in_ci() is ci


def test_missing_shared_data_fails_under_ci(monkeypatch, tmp_path):
    monkeypatch.setenv("CI", "true")
    missing = tmp_path / "stackoverflow" / "train.tsv"
    with pytest.raises(pytest.fail.Exception, match=r"shared evaluation data not found: .*train\.tsv.*CI is set"):
        require_shared(tmp_path, missing)


def test_missing_shared_data_skips_outside_ci(monkeypatch, tmp_path):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"shared evaluation data not found: .*train\.tsv"):
        require_shared(tmp_path / "stackoverflow" / "train.tsv")


@pytest.mark.parametrize("ci", ["true", None])
def test_present_shared_data_neither_skips_nor_fails(monkeypatch, tmp_path, ci):
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    (tmp_path / "train.tsv").write_text("id\ttitle\ttag\n", encoding="utf-8")
    assert require_shared(tmp_path, tmp_path / "train.tsv") is None
