"""`gur` on a machine without the shared data ($GUR_SHARED_DATA at an empty folder, the cwd elsewhere): a
missing default input is one `gur: error:` line naming the option and the file, a missing default evaluation
set is skipped with a note, both before Prefect starts; with the shared data the defaults are the old paths."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from flows import parameters
from flows.parameters import EvaluateParams, evaluation_sets, missing_sts_default
from gur_cli import build_parser
from storage.shared_data import missing_default, shared_data

REPO = Path(__file__).resolve().parents[2]
# What this file checks `shared_data` against, so named once: its documented default without the variable.
SIBLING = REPO.parent / "shared" / "data"


def gur(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    """The real CLI in a fresh cwd, its shared data an empty folder."""
    (tmp_path / "empty-shared-data").mkdir(exist_ok=True)
    (tmp_path / "cwd").mkdir(exist_ok=True)
    environ = {**os.environ, "PYTHONPATH": str(REPO), "GUR_SHARED_DATA": str(tmp_path / "empty-shared-data")}
    environ.update(PREFECT_HOME=str(tmp_path / "prefect"), COLUMNS="1000")  # COLUMNS: --help on one line
    environ.pop("PREFECT_API_URL", None)
    environ.pop("GUR_DEBUG", None)
    cmd = [sys.executable, "-m", "gur_cli", "--root", str(tmp_path / "data"), *argv]
    return subprocess.run(cmd, cwd=tmp_path / "cwd", env=environ, capture_output=True, text=True, timeout=120)


def error_line(proc: subprocess.CompletedProcess, tmp_path: Path) -> str:
    """The one `gur: error:` line of a command stopped by its checks: nothing ran, no traceback."""
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gur: error: "), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not (tmp_path / "data").exists() and not (tmp_path / "prefect").exists()  # no stage, no server
    return lines[0]


def test_shared_data_honours_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("GUR_SHARED_DATA", str(tmp_path))
    assert shared_data("stsb", "stsb-en-dev.csv") == tmp_path / "stsb" / "stsb-en-dev.csv"
    assert shared_data() == tmp_path


def test_without_the_variable_it_is_the_repositorys_sibling(monkeypatch):
    monkeypatch.delenv("GUR_SHARED_DATA", raising=False)
    assert shared_data("stackoverflow", "train.tsv") == SIBLING / "stackoverflow" / "train.tsv"
    monkeypatch.setenv("GUR_SHARED_DATA", "")  # empty: unset
    assert shared_data() == SIBLING


def test_defaults_are_the_old_paths_where_the_shared_data_is(monkeypatch):
    """Stage fingerprints hold these paths: without the variable they are what the flows' `../<shared data>/...`
    (relative to the repository) resolved to."""
    monkeypatch.delenv("GUR_SHARED_DATA", raising=False)
    old = lambda relative: str((SIBLING / relative).resolve())  # noqa: E731 - REPO is resolved: REPO/.. is its parent
    code = "from flows.parameters import STACKOVERFLOW, STSB_DEV; print(STACKOVERFLOW); print(*STSB_DEV, sep='\\n')"
    env = {k: v for k, v in os.environ.items() if k != "GUR_SHARED_DATA"}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        old("stackoverflow/train.tsv"),
        old("stsb/stsb-en-dev.csv"),
        old("stsb/stsb-zh-dev.csv"),
    ]
    assert parameters.stsb_file("en", "train") == old("stsb/stsb-en-train.csv")


def test_missing_default_is_one_line_with_the_key_the_file_and_the_fix():
    line = missing_default("--dev", Path("/x/stsb-en-dev.csv"), "pass --dev FILE")
    assert line == (
        "--dev: the default /x/stsb-en-dev.csv is not on this machine; pass --dev FILE, "
        "or set GUR_SHARED_DATA to a copy of the shared data folder"
    )


def test_sts_without_its_default_files_names_the_option_and_the_file(tmp_path):
    line = error_line(gur(tmp_path, "sts"), tmp_path)
    missing = (tmp_path / "empty-shared-data" / "stsb" / "stsb-en-train.csv").resolve()
    assert line.startswith(f"gur: error: --train: the default {missing} is not on this machine; ")
    assert "download stsb-en-train.csv and stsb-en-dev.csv" in line and "pass --train FILE --dev FILE," in line
    given = tmp_path / "train.csv"
    given.write_text("a,b,1.0\n", encoding="utf-8")
    line = error_line(gur(tmp_path, "sts", "--train", str(given)), tmp_path)  # a given file keeps working
    assert line.startswith(f"gur: error: --dev: the default {missing.with_name('stsb-en-dev.csv')} is not on")
    assert "pass --dev FILE," in line and "--train FILE" not in line


def test_missing_sts_default_is_none_where_the_files_are(monkeypatch, tmp_path):
    monkeypatch.setenv("GUR_SHARED_DATA", str(tmp_path))
    (tmp_path / "stsb").mkdir()
    for split in ("train", "dev"):
        (tmp_path / "stsb" / f"stsb-zh-{split}.csv").write_text("a,b,1.0\n", encoding="utf-8")
    assert missing_sts_default("zh", None, None) is None
    assert missing_sts_default("en", "given.csv", "given.csv") is None  # given files are not looked up here
    assert missing_sts_default("en", None, "given.csv").startswith("--train: the default ")


def test_evaluate_with_no_set_left_is_one_line_naming_the_skipped_defaults(tmp_path):
    line = error_line(gur(tmp_path, "evaluate", "bm25", "--no-lee", "--no-demo"), tmp_path)
    shared = (tmp_path / "empty-shared-data").resolve()
    assert line == (
        "gur: error: no evaluation set selected (the defaults of --stackoverflow and --stsb are not on this "
        f"machine: {shared}): give --stackoverflow, --stsb, --beir, or keep Lee-50 / demo"
    )


def test_evaluate_skips_each_missing_default_set_with_a_note(monkeypatch, tmp_path):
    """The sets left run; a given file that is missing is not skipped (it is reported as not run)."""
    stackoverflow, en, zh = tmp_path / "train.tsv", tmp_path / "stsb-en-dev.csv", tmp_path / "stsb-zh-dev.csv"
    monkeypatch.setattr(parameters, "STACKOVERFLOW", str(stackoverflow))
    monkeypatch.setattr(parameters, "STSB_DEV", (str(en), str(zh)))
    en.write_text("a,b,1.0\n", encoding="utf-8")
    p, notes = evaluation_sets(EvaluateParams(models=["bm25"], stackoverflow=str(stackoverflow)))
    assert (p.stackoverflow, p.stsb, p.lee, p.demo_retrieval) == ("", [str(en)], True, True)
    assert [note.split(": the default ")[0] for note in notes] == ["--stackoverflow", "--stsb"]
    assert f"{stackoverflow} is not on this machine; skipped: to add it, pass --stackoverflow FILE" in notes[0]
    assert f"{zh} is not on this machine; skipped: to add it, pass --stsb FILE" in notes[1]
    given = str(tmp_path / "mine.csv")
    p, notes = evaluation_sets(EvaluateParams(stackoverflow="", stsb=[given]))
    assert (p.stackoverflow, p.stsb, notes) == ("", [given], [])


def test_help_names_the_defaults_in_the_variables_folder_and_what_absence_does(tmp_path):
    proc = gur(tmp_path, "sts", "--help")
    text = " ".join(proc.stdout.split())
    shared = (tmp_path / "empty-shared-data").resolve()
    assert proc.returncode == 0 and "../shared" not in text
    assert f"--train TRAIN training CSV (default: {shared}/stsb/stsb-LANG-train.csv; when that file is absent" in text
    evaluate = " ".join(gur(tmp_path, "evaluate", "--help").stdout.split())
    assert f"(default: {shared}/stackoverflow/train.tsv, skipped with a note if absent" in evaluate


def test_mine_keywords_without_an_input_needs_no_shared_data(monkeypatch, tmp_path):
    """Its default input is the demo corpus in gensim's wheel, not a shared-data file: the checks pass."""
    from tasks.ingest.readers import default_corpus

    monkeypatch.setenv("GUR_SHARED_DATA", str(tmp_path))
    args = build_parser().parse_args(["mine-keywords"])
    args.check(args)
    assert args.input_path is None and default_corpus().is_file()
    text = gur(tmp_path, "mine-keywords", "--help").stdout
    assert "(default: the demo corpus)" in " ".join(text.split()) and "shared" not in text


def test_gur_nightly_names_a_missing_guard_file_and_the_fix_before_any_work(tmp_path):
    (tmp_path / "corpus").mkdir()
    config = tmp_path / "nightly.toml"
    config.write_text('[corpus]\npath = "corpus"\n[evaluate]\nstsb = ["stsb-en-train.csv"]\n', encoding="utf-8")
    line = error_line(gur(tmp_path, "nightly", "--config", str(config)), tmp_path)
    assert "[evaluate] stsb names" in line and "stsb-en-train.csv, which is not on this machine" in line
    assert "name it in [evaluate] stsb, or turn the STS guard off with stsb = [] and [gate] guards = {}" in line
