"""A data root built before `tasks/` became one package per stage is reused in full after it: the stage
fingerprints of a fixed input are the ones the flat layout (commit 6e34a83) computed, and a root that is
built, moved and rerun comes entirely from its cache."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers.flow_runs import task_states

pytestmark = pytest.mark.usefixtures("prefect_harness")

DOCS = [
    {"id": 1, "title": "Graphs", "text": "A graph has nodes. A graph has edges.\nEdges link nodes."},
    {"id": 2, "title": "模型", "text": "模型需要数据。数据来自文档！"},
    {
        "id": 3,
        "title": "Rivers",
        "text": "The river runs to the sea. The river runs past the city. A city has a river.",
    },
]
MTIME_NS = 1_700_000_000_000_000_000  # a single file's ingest fingerprint has its name, size and mtime
# What the flat layout computed for this input (PYTHONPATH at commit 6e34a83, the same calls): a change here
# means every existing data root would be recomputed.
BEFORE_THE_MOVE = {
    "documents": "4bf3c81b374cd4b5",
    "sentences": "7f11de5232241b46",
    "pairs": "efbbd25413c69964",
    "shards": "4e3b3954dc4b6125",
    "keywords": "e34ad47abae06887",
}


def test_fingerprints_are_those_of_the_flat_layout_and_a_moved_root_is_all_cache_hits(tmp_path):
    from flows.build_pairs import build_pairs
    from flows.mine_keywords import mine_keywords

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS), encoding="utf-8")
    os.utime(corpus, ns=(MTIME_NS, MTIME_NS))
    root = tmp_path / "data"
    refs = build_pairs(input_path=str(corpus), root=str(root), workers=1)
    keywords = mine_keywords(input_path=str(corpus), k=5, root=str(root))
    assert {**{k: v["fingerprint"] for k, v in refs.items()}, "keywords": keywords["fingerprint"]} == BEFORE_THE_MOVE

    moved = tmp_path / "elsewhere" / "data"
    moved.parent.mkdir()
    shutil.move(root, moved)
    build = build_pairs(input_path=str(corpus), root=str(moved), workers=1, return_state=True)
    assert build.result() == refs
    assert {k: v for k, v in task_states(build).items() if k != "update-catalog"} == dict.fromkeys(
        ("ingest", "split", "pair", "shuffle"), "Cached"
    )
    mined = mine_keywords(input_path=str(corpus), k=5, root=str(moved), return_state=True)
    assert mined.result() == keywords
    assert {k: v for k, v in task_states(mined).items() if k != "update-catalog"} == {
        "ingest": "Cached",
        "keywords": "Cached",
    }


def test_a_record_names_a_path_under_its_root_relative_to_it_and_reads_it_back_where_the_root_is(tmp_path):
    from storage.layout import record_path, recorded_path

    root = tmp_path / "data"
    export = f"{root}/train/0123456789abcdef/export"
    assert record_path(root, export) == "train/0123456789abcdef/export"
    assert record_path(root, Path(export)) == "train/0123456789abcdef/export"
    assert record_path(root, root) == "."
    for outside in ("/models/all-MiniLM-L6-v2", f"{root}-other/train/0123456789abcdef/export", "minilm", ""):
        assert record_path(root, outside) == outside  # a model folder elsewhere, a sibling root, a name
    moved = tmp_path / "disk2" / "data"
    assert recorded_path(moved, record_path(root, export)) == f"{moved}/train/0123456789abcdef/export"
    assert recorded_path(moved, ".") == str(moved)


def test_an_absolute_record_from_before_records_were_relative_is_read_where_the_moved_root_holds_it(tmp_path):
    from storage.layout import recorded_path

    root = tmp_path / "disk2" / "data"
    (root / "train" / "0123456789abcdef" / "export").mkdir(parents=True)
    (root / "holdout" / "fedcba9876543210").mkdir(parents=True)
    old = "/mnt/disk1/data"
    assert recorded_path(root, f"{old}/train/0123456789abcdef/export") == f"{root}/train/0123456789abcdef/export"
    assert (
        recorded_path(root, f"{old}/holdout/fedcba9876543210/holdout.tsv")
        == f"{root}/holdout/fedcba9876543210/holdout.tsv"
    )
    for unchanged in (
        f"{old}/train/aaaaaaaaaaaaaaaa/export",  # an output this root does not hold (another root's: promoted by hand)
        "/models/all-MiniLM-L6-v2",  # a model folder outside any root
        f"{root}/train/0123456789abcdef/export",  # already here
        "",
    ):
        assert recorded_path(root, unchanged) == unchanged


def test_the_catalog_of_a_copied_root_is_rewritten_for_its_new_place_before_it_is_read(tmp_path):
    """Its views name absolute paths: read as they are, a copy's would read the original's files (and a moved
    root's, none). The first read here rewrites them; the original is left as it was."""
    from flows.build_pairs import build_pairs
    from storage.catalog import connect_catalog, written_elsewhere

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS), encoding="utf-8")
    root, copy = tmp_path / "data", tmp_path / "copy" / "data"
    build_pairs(input_path=str(corpus), root=str(root), workers=1)
    shutil.copytree(root, copy)
    assert written_elsewhere(copy) and not written_elsewhere(root)
    con = connect_catalog(copy)
    try:
        views = [sql for (sql,) in con.sql("SELECT sql FROM duckdb_views() WHERE NOT internal").fetchall()]
        assert con.sql("SELECT count(*) FROM documents").fetchone()[0] == len(DOCS)
    finally:
        con.close()
    assert views and all(str(root) + "/" not in sql for sql in views) and any(str(copy) in sql for sql in views)
    assert not written_elsewhere(copy) and not written_elsewhere(root)


def test_a_catalog_whose_sidecar_names_no_root_is_read_as_it_is_and_the_next_refresh_names_it(tmp_path):
    """Written by an earlier version (no `root` in `.catalog-main.json`): read as it is (not ours to rewrite on a
    read); the next refresh with the same views names the root in the sidecar without rewriting the file."""
    from flows.build_pairs import build_pairs
    from storage.catalog import MAIN, connect_catalog, refresh_catalog

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS), encoding="utf-8")
    root = tmp_path / "data"
    build_pairs(input_path=str(corpus), root=str(root), workers=1)
    sidecar = json.loads((root / MAIN).read_text(encoding="utf-8"))
    assert sidecar["root"] == str(root.resolve())
    (root / MAIN).write_text(json.dumps({k: v for k, v in sidecar.items() if k != "root"}), encoding="utf-8")
    before = os.stat(root / "catalog.duckdb")
    connect_catalog(root).close()
    refresh_catalog(root)
    after = os.stat(root / "catalog.duckdb")
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert json.loads((root / MAIN).read_text(encoding="utf-8"))["root"] == str(root.resolve())
