"""A planted `_manifest.json` cannot turn a catalog refresh against its user: a table name holding SQL
runs nothing, a glob that leaves its stage folder reads nothing, and the manifest is skipped with a
warning that names it while every other output still gets its views."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage.catalog import refresh_catalog
from storage.catalog_sql import quote_name
from storage.manifest_index import unsafe_tables


def stage(root: Path, name: str, tables: dict, rows: int = 2) -> Path:
    folder = root / name / "0123456789abcdef"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"x": list(range(rows))}), folder / "part-00000.parquet")
    (folder / "_manifest.json").write_text(json.dumps({"stage": name, "tables": tables, "finished_at": 1.0}))
    return folder


def views(root: Path) -> dict[str, int]:
    with duckdb.connect(str(root / "catalog.duckdb"), read_only=True) as con:
        names = con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'")
        return {n: con.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for (n,) in names.fetchall()}


def test_a_statement_in_a_table_name_runs_nothing(tmp_path, caplog):
    root, planted = tmp_path / "data", tmp_path / "pwned.csv"
    stage(root, "good", {"good_rows": "part-*.parquet"})
    evil = f"x\" AS SELECT 1; COPY (SELECT 42 AS x) TO '{planted}' (HEADER); --"
    folder = stage(root, "evil", {evil: "part-*.parquet"})
    with caplog.at_level(logging.WARNING, logger="storage.catalog"):
        refresh_catalog(root)
    assert not planted.exists()
    assert views(root) == {"good_rows": 2}
    assert str(folder / "_manifest.json") in caplog.text and "is not [A-Za-z0-9_]+" in caplog.text


@pytest.mark.parametrize("pattern", ["../../outside/*.parquet", "{outside}/*.parquet", "link/*.parquet"])
def test_a_glob_that_leaves_its_stage_folder_reads_nothing(tmp_path, caplog, pattern):
    root, outside = tmp_path / "data", tmp_path / "outside"
    outside.mkdir()
    pq.write_table(pa.table({"secret": ["s3cr3t"] * 5}), outside / "part-00000.parquet")
    stage(root, "good", {"good_rows": "part-*.parquet"})
    folder = stage(root, "evil", {"leak": pattern.format(outside=outside)})
    (folder / "link").symlink_to(outside)
    with caplog.at_level(logging.WARNING, logger="storage.catalog"):
        refresh_catalog(root)
    assert views(root) == {"good_rows": 2}
    assert str(folder / "_manifest.json") in caplog.text


def test_names_and_globs_by_hand(tmp_path):
    assert unsafe_tables(tmp_path, {"tables": {"shards_short": "short/part-*.parquet"}}) == ""
    assert "not [A-Za-z0-9_]+" in unsafe_tables(tmp_path, {"tables": {"a\n": "x"}})
    assert "inside the stage folder" in unsafe_tables(tmp_path, {"tables": {"a": "/etc/*"}})
    assert quote_name("wiki_1a2b3c4d") == '"wiki_1a2b3c4d"'
    with pytest.raises(ValueError, match="not a catalog name"):
        quote_name('main"; DROP')


@pytest.mark.parametrize("value", ["../../tmp/planted", "/tmp/planted", "0123456789abcdef/..", "keywords"])
def test_keywords_takes_a_fingerprint_only(tmp_path, capsys, value):
    from flows.train import question_source
    from gur_cli import main

    with pytest.raises(ValueError, match="is not a fingerprint"):
        question_source(tmp_path, value, None, "tfcsg")
    assert main(["--root", str(tmp_path), "train", "--method", "tfcsg", "--keywords", value]) == 1
    assert "is not a fingerprint" in capsys.readouterr().err
    assert not (tmp_path / ".prefect").exists()  # refused before anything started


def test_the_manifest_index_never_outlives_what_it_describes(tmp_path, caplog):
    """`.catalog-index/` spares a refresh re-reading unchanged manifests; every change it could hide is
    seen: a rewritten manifest, a link planted in a table's folder after a refresh, a damaged index, an
    index file another process wrote. A file per stage: a stage with no new output is not written again."""
    from storage.manifest_index import INDEX, INDEX_VERSION, OLD_INDEX

    root, outside = tmp_path / "data", tmp_path / "outside"
    outside.mkdir()
    pq.write_table(pa.table({"secret": ["s3cr3t"] * 5}), outside / "part-00000.parquet")
    good = stage(root, "good", {"good_rows": "part-*.parquet"})
    sub = stage(root, "sub", {"sub_rows": "rows/part-*.parquet"})
    (sub / "rows").mkdir()
    pq.write_table(pa.table({"x": [1, 2, 3]}), sub / "rows" / "part-00000.parquet")
    (root / OLD_INDEX).write_text("{}")  # the single file of earlier versions: replaced
    refresh_catalog(root)
    assert sorted(p.name for p in (root / INDEX).iterdir()) == ["good.json", "sub.json"]
    assert not (root / OLD_INDEX).exists()
    assert list(json.loads((root / INDEX / "good.json").read_text())["outputs"]) == ["good/0123456789abcdef"]
    assert views(root) == {"good_rows": 2, "sub_rows": 3}
    sub_written = (root / INDEX / "sub.json").stat().st_mtime_ns

    # The same path, another manifest (an output deleted and made again): its new tables are read.
    manifest = good / "_manifest.json"
    manifest.write_text(json.dumps({"stage": "good", "tables": {"renamed": "part-*.parquet"}, "finished_at": 2.0}))
    refresh_catalog(root)
    assert views(root) == {"renamed": 2, "sub_rows": 3}
    assert (root / INDEX / "sub.json").stat().st_mtime_ns == sub_written  # nothing new there

    # A link out of the root planted in a table's sub-folder after the verdict was cached: skipped again.
    (sub / "rows" / "part-00001.parquet").symlink_to(outside / "part-00000.parquet")
    with caplog.at_level(logging.WARNING, logger="storage.catalog"):
        refresh_catalog(root)
    assert views(root) == {"renamed": 2}
    assert "leads outside" in caplog.text

    # A damaged index is a full read, not an error.
    (sub / "rows" / "part-00001.parquet").unlink()
    (root / INDEX / "sub.json").write_text("{not json")
    refresh_catalog(root)
    assert views(root) == {"renamed": 2, "sub_rows": 3}
    assert json.loads((root / INDEX / "sub.json").read_text())["version"] == INDEX_VERSION

    # This process keeps the index it last read or wrote; one another process wrote since is read again.
    data = json.loads((root / INDEX / "sub.json").read_text())
    data["outputs"]["sub/0123456789abcdef"]["problem"] = "verdict of another process"
    (root / INDEX / "sub.json").write_text(json.dumps(data))
    with caplog.at_level(logging.WARNING, logger="storage.catalog"):
        refresh_catalog(root)
    assert views(root) == {"renamed": 2}
    assert "verdict of another process" in caplog.text


def test_main_is_remembered_only_for_the_catalog_file_it_was_written_with(tmp_path):
    """`.catalog-main.json` spares a refresh opening the old catalog to learn what `main` showed; a catalog
    written otherwise (another tool, another version) is asked instead."""
    from storage.catalog import CATALOG, MAIN, _previous_main, _remembered_main

    root = tmp_path / "data"
    head = stage(root, "keywords", {"keywords": "part-*.parquet"})
    manifest = json.loads((head / "_manifest.json").read_text())
    (head / "_manifest.json").write_text(json.dumps({**manifest, "rows": {"keywords": 2}}))
    refresh_catalog(root)
    path = root / CATALOG
    assert _remembered_main(path) == _previous_main_from_db(path) == {"keywords": "keywords/0123456789abcdef"}
    assert json.loads((root / MAIN).read_text())["main"] == _remembered_main(path)
    with duckdb.connect(str(path)) as con:  # a read-write session changes the file
        con.execute("CREATE TABLE mine AS SELECT 1 AS x")
    assert _remembered_main(path) is None
    assert _previous_main(path, deadline=0) == _previous_main_from_db(path)


def _previous_main_from_db(path: Path) -> dict:
    with duckdb.connect(str(path), read_only=True) as con:
        return dict(con.execute("SELECT kind, output FROM builds WHERE in_main").fetchall())
