"""`gur` errors: one line on stderr, no traceback; input errors are found before Prefect is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from gur_cli import error_line, one_line
from tasks.ingest.checks import check_corpus, check_train_options, field_names, train_option_names
from tasks.ingest.readers import CorpusError, ReaderConfig
from tests.helpers.servers import fresh_prefect_home

REPO = Path(__file__).resolve().parents[2]


def gur(*argv: str, root: Path, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(REPO), **env}
    environ.pop("PREFECT_API_URL", None)
    environ.pop("GUR_DEBUG", None)
    cmd = [sys.executable, "-m", "gur_cli", "--root", str(root), *argv]
    return subprocess.run(cmd, cwd=root.parent, env=environ, capture_output=True, text=True, timeout=timeout)


def assert_one_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode != 0
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gur: error: "), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    return lines[0]


def test_a_missing_input_is_one_line_within_seconds(tmp_path):
    start = time.monotonic()
    proc = gur("build-pairs", "/no/such/file", root=tmp_path / "data")
    assert time.monotonic() - start < 5  # Prefect is never imported, no server is started
    assert assert_one_line(proc) == "gur: error: /no/such/file: no such file or folder"


def test_a_csv_without_the_text_column_suggests_the_one_it_has(tmp_path):
    (tmp_path / "corpus.csv").write_text("id,body,title\n1,Some text. More text.,A\n", encoding="utf-8")
    proc = gur("build-pairs", "corpus.csv", root=tmp_path / "data")
    line = assert_one_line(proc)
    assert (
        line == "gur: error: no column 'text' in corpus.csv (line 1); it has: id, body, title — try --text-field body"
    )
    for command in (["mine-keywords", "corpus.csv"], ["train", "--method", "simcse", "--texts", "corpus.csv"]):
        assert "try --text-field body" in assert_one_line(gur(*command, root=tmp_path / "data"))


def test_sql_errors_are_duckdbs_message_on_one_line(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    duckdb.connect(str(root / "catalog.duckdb")).execute("CREATE VIEW v AS SELECT 1 AS x").close()
    line = assert_one_line(gur("sql", "SELEC 1", root=root))
    assert line == 'gur: error: Parser Error: syntax error at or near "SELEC"'
    assert "Table with name nope does not exist" in assert_one_line(gur("sql", "SELECT * FROM nope", root=root))
    ok = gur("sql", "SELECT x FROM v", root=root)
    assert ok.returncode == 0 and "(1 row)" in ok.stdout


@pytest.mark.soak
@pytest.mark.slow
def test_an_error_inside_a_running_flow_is_one_line(tmp_path, migrated_prefect_db):
    """The flow starts (the input exists and has the column) and stops in a task: Prefect's traceback and
    failure lines stay off the console, `gur: error:` is printed once; GUR_DEBUG=1 shows the traceback. Its own
    temporary server, on a database already migrated (a first run's migration: tests/cli/test_cli_server.py)."""
    (tmp_path / "empty.jsonl").write_text('{"text": ""}\n{"text": " "}\n', encoding="utf-8")
    home = fresh_prefect_home(tmp_path / "ph", migrated_prefect_db)
    proc = gur("build-pairs", "empty.jsonl", root=tmp_path / "data", timeout=300, PREFECT_HOME=str(home))
    assert proc.returncode == 1
    noise = [line for line in proc.stderr.splitlines() if "| ERROR" in line or "Failed(" in line]
    assert noise == [], proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("gur:")]
    assert errors == [
        f"gur: error: {tmp_path / 'empty.jsonl'}: 0 documents (empty_text=2; the rejects table has "
        "a row for each); check the path, --format and --text-field, or pass --allow-empty"
    ], proc.stderr
    assert "Traceback" not in proc.stderr


def test_check_corpus_reads_each_formats_fields(tmp_path):
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text("\n" + json.dumps({"id": 1, "content": "x"}) + "\n", encoding="utf-8")
    assert field_names(jsonl, "jsonl") == (["id", "content"], f"{jsonl} (line 2)")
    with pytest.raises(
        CorpusError, match=r"no column 'text' .*line 2\); it has: id, content — try --text-field content"
    ):
        check_corpus(jsonl, ReaderConfig())
    tsv = tmp_path / "c.tsv"
    tsv.write_text("ID\tTitel\ttext\n", encoding="utf-8")
    check_corpus(tsv, ReaderConfig())  # a title or id column under the default name is optional
    with pytest.raises(CorpusError, match="no column 'titel'.*try --title-field Titel"):
        check_corpus(tsv, ReaderConfig(title_field="titel"))
    check_corpus(tsv, ReaderConfig(title_field="", id_field="ID"))
    parquet = tmp_path / "c.parquet"
    duckdb.execute(f"COPY (SELECT 'a' AS body) TO '{parquet}' (FORMAT parquet)")
    with pytest.raises(CorpusError, match="try --text-field body"):
        check_corpus(parquet, ReaderConfig())
    with pytest.raises(CorpusError, match="unknown format 'xml'"):
        check_corpus(parquet, ReaderConfig(format="xml"))


def test_train_options_are_the_train_config_fields():
    from dataclasses import fields

    from models.training.config import TrainConfig

    assert set(train_option_names()) == {f.name for f in fields(TrainConfig)} - {
        "out_dir",
        "shards",
        "method",
        "questions",
        "replay_source",  # the train task sets it from `replay_since`
    }
    assert check_train_options({"kl_weight": 0.5}) == {"kl_weight": 0.5}
    with pytest.raises(ValueError, match="did you mean 'kl_weight'"):
        check_train_options({"kl_weigth": 0.5})
    with pytest.raises(ValueError, match="JSON object"):
        check_train_options([1])


def test_error_lines():
    assert one_line(ValueError("Parser Error: bad\n\nLINE 1: SELEC 1\n        ^")) == "Parser Error: bad"
    assert error_line(FileNotFoundError("x: no such file or folder")) == "x: no such file or folder"
    assert error_line(KeyError("k")) == "KeyError: 'k' (GUR_DEBUG=1 shows the traceback)"


def test_serve_without_a_server_is_one_line(tmp_path):
    line = assert_one_line(gur("serve", root=tmp_path / "data", PREFECT_HOME=str(tmp_path / "ph")))
    assert (
        line
        == "gur: error: gur serve needs a running Prefect server: `gur server start` first (or set PREFECT_API_URL)"
    )


def test_nightly_and_evaluate_inputs_are_checked_before_prefect(tmp_path):
    root = tmp_path / "data"
    line = assert_one_line(gur("nightly", "--config", str(tmp_path / "no.toml"), root=root))
    assert "no.toml: no nightly config" in line
    (tmp_path / "nightly.toml").write_text('[corpus]\npath = "incoming"\n', encoding="utf-8")
    line = assert_one_line(gur("nightly", "--config", str(tmp_path / "nightly.toml"), root=root))
    assert line.endswith(f"[corpus] path {tmp_path / 'incoming'}: no such file or folder")
    line = assert_one_line(gur("evaluate", "./no/such/export", "--stackoverflow", "", root=root))
    assert line == "gur: error: model ./no/such/export: no such file or folder"
    line = assert_one_line(gur("train", "--init-from", "nowhere", root=root))
    assert line == "gur: error: --init-from nowhere: no such file or folder"
