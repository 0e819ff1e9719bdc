"""The storage contract: fingerprints, atomic shards, markers, manifests, the catalog."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage.atomic import atomic_path, atomic_write_json
from storage.catalog import refresh_catalog
from storage.catalog_plan import latest_tables
from storage.fingerprint import canonical_json, content_signature, file_signature, fingerprint, fingerprints
from storage.manifest import is_complete, write_manifest
from storage.shards import (
    finished_shards,
    shard_done,
    sum_shard_stats,
    sweep_temporaries,
    write_shard,
    write_shard_stats,
)
from tasks.ingest.documents import IngestConfig
from tasks.ingest.readers import ReaderConfig
from tests.helpers import REPO


def test_fingerprint_is_stable_across_processes_and_key_order():
    config = IngestConfig(ReaderConfig(text_field="body"), "src", 100)
    here = fingerprint("ingest", "v1", config, ["abc"])
    code = (
        "from storage.fingerprint import fingerprint;"
        "from tasks.ingest.documents import IngestConfig;from tasks.ingest.readers import ReaderConfig;"
        "print(fingerprint('ingest','v1',IngestConfig(ReaderConfig(text_field='body'),'src',100),['abc']))"
    )
    env_seeds = [{"PYTHONHASHSEED": "1"}, {"PYTHONHASHSEED": "2"}]
    others = [
        subprocess.run([sys.executable, "-c", code], cwd=REPO, env=e, capture_output=True, text=True).stdout.strip()
        for e in env_seeds
    ]
    assert others == [here, here]
    assert len(here) == 16
    assert canonical_json({"b": 1, "a": [1, 2]}) == canonical_json({"a": [1, 2], "b": 1})


def test_fingerprint_changes_with_config_code_and_upstream():
    base = fingerprint("split", "v1", {"max": 512}, ["u1"])
    assert fingerprint("split", "v1", {"max": 256}, ["u1"]) != base
    assert fingerprint("split", "v2", {"max": 512}, ["u1"]) != base
    assert fingerprint("split", "v1", {"max": 512}, ["u2"]) != base
    assert fingerprint("split", "v1", {"max": 512}, ["u1"]) == base


def test_fingerprints_of_many_upstreams_equal_fingerprint_of_each():
    """The batch form splices the payload from canonical pieces: it must hash the same bytes as the whole,
    for any config (dataclasses, paths, unicode, nested) and any upstream strings (quotes, unicode, none)."""
    import random

    rng = random.Random(7)
    words = ["a", 'b"q', "ü", "中文", "x\\y", "", "path/to/f.jsonl", "1e5"]
    configs = [
        IngestConfig(ReaderConfig(text_field="body"), "src", 100),
        {"max": 512, "z": [1, 2.5, None], "a": {"ü": True}},
        {"path": Path("/tmp/a b"), "n": -3},
        "plain",
        None,
    ]
    for config in configs:
        upstreams = [[rng.choice(words) for _ in range(rng.randint(0, 3))] for _ in range(40)]
        for stage, code in (("ingest-file", "ingest_file_v3"), ("split", "v1")):
            expected = [fingerprint(stage, code, config, u) for u in upstreams]
            assert fingerprints(stage, code, config, upstreams) == expected


def test_file_signature_sees_edits(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("one")
    before = file_signature(tmp_path)
    time.sleep(0.01)
    f.write_text("two!")
    assert file_signature(tmp_path) != before
    assert file_signature(f)[0][:2] == ["a.txt", 4]


def test_shards_are_atomic_marked_and_swept(tmp_path):
    table = pa.table({"x": [1, 2, 3]})
    final = write_shard(tmp_path, 3, table)
    assert final == tmp_path / "part-00003.parquet" and shard_done(tmp_path, 3)
    assert not shard_done(tmp_path, 0)
    write_shard(tmp_path, 0, table, table_name="rejects")
    assert finished_shards(tmp_path) == [tmp_path / "part-00003.parquet"]
    assert finished_shards(tmp_path, "rejects") == [tmp_path / "rejects" / "part-00000.parquet"]
    assert pq.read_table(final).equals(table)
    # A crashed writer leaves a temp file outside the reader glob; the next run sweeps it.
    (tmp_path / "_tmp").mkdir(exist_ok=True)
    (tmp_path / "_tmp" / "part-00004.deadbeef.parquet").write_bytes(b"partial")
    assert sorted(p.name for p in tmp_path.glob("part-*.parquet")) == ["part-00003.parquet"]
    assert sweep_temporaries(tmp_path) == 1 and not (tmp_path / "_tmp").exists()


def test_atomic_path_keeps_the_old_file_until_the_new_one_is_whole(tmp_path):
    target = tmp_path / "sub" / "pointer.json"
    atomic_write_json(target, {"v": 1}, fsync=True)
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("crash while writing")
    assert json.loads(target.read_text()) == {"v": 1}  # the failed write changed nothing
    assert [p.name for p in target.parent.iterdir()] == ["pointer.json"]  # and left no temporary
    # A folder replaces a folder; a temporary in another folder (a stage's _tmp/) lands at the target.
    with atomic_path(tmp_path / "export") as tmp:
        tmp.mkdir()
        (tmp / "a").write_text("1")
    with atomic_path(tmp_path / "export", tmp_dir=tmp_path / "_tmp") as tmp:
        assert tmp.parent == tmp_path / "_tmp" and tmp.name.startswith(".")
        tmp.mkdir()
        (tmp / "b").write_text("2")
    assert [p.name for p in (tmp_path / "export").iterdir()] == ["b"]
    assert list((tmp_path / "_tmp").iterdir()) == []


def test_same_table_gives_same_bytes(tmp_path):
    table = pa.table({"s": ["a", "b"], "n": pa.array([1, 2], pa.int32())})
    a = write_shard(tmp_path / "a", 0, table).read_bytes()
    b = write_shard(tmp_path / "b", 0, table).read_bytes()
    assert a == b


def test_shard_stats_sum(tmp_path):
    write_shard_stats(tmp_path, 0, {"rows": 2, "drop": 1})
    write_shard_stats(tmp_path, 1, {"rows": 3})
    assert sum_shard_stats(tmp_path) == {"drop": 1, "rows": 5}


def _stage(root, stage, fp, finished_at, values, complete=True):
    out = root / stage / fp
    write_shard(out, 0, pa.table({"v": values}))
    if complete:
        write_manifest(out, {"finished_at": finished_at, "tables": {stage + "_t": "part-*.parquet"}})
    return out


def test_catalog_views_point_at_latest_complete_stage(tmp_path):
    _stage(tmp_path, "alpha", "old", 1.0, [1])
    _stage(tmp_path, "alpha", "new", 2.0, [1, 2])
    _stage(tmp_path, "alpha", "crashed", 3.0, [1, 2, 3], complete=False)
    assert not is_complete(tmp_path / "alpha" / "crashed")
    assert latest_tables(tmp_path) == {"alpha_t": tmp_path / "alpha" / "new" / "part-*.parquet"}
    refresh_catalog(tmp_path)
    con = duckdb.connect(str(tmp_path / "catalog.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM alpha_t").fetchone() == (2,)
    con.close()
    manifest = json.loads((tmp_path / "alpha" / "new" / "_manifest.json").read_text())
    assert manifest["finished_at"] == 2.0


def test_content_signature_follows_bytes_not_times(tmp_path):
    f = tmp_path / "set" / "queries.tsv"
    f.parent.mkdir()
    f.write_text("q1\thello\n")
    before = content_signature(tmp_path / "set")
    os.utime(f, ns=(1, 1))  # touched: same bytes, same key
    assert content_signature(tmp_path / "set") == before
    f.write_text("q1\thellO\n")  # same size, other bytes
    os.utime(f, ns=(1, 1))
    assert content_signature(tmp_path / "set") != before
    assert content_signature(f)[0][:2] == ["queries.tsv", 9]


def test_a_linked_shard_takes_its_hash_from_the_source_manifest(tmp_path, monkeypatch):
    """A night links every unit's shards into new outputs: their inventory reuses the source's listed
    SHA-256 (same inode, size and mtime) instead of reading the bytes again, and is the same inventory."""
    import storage.manifest as manifest_mod
    from storage.manifest import inventory, read_manifest
    from storage.shards import link_shard, read_shard

    source, linked = tmp_path / "unit", tmp_path / "assembled"
    write_shard(source, 0, pa.table({"v": [1, 2, 3]}))
    write_shard_stats(source, 0, {"rows": 3})
    write_manifest(source, {"files": inventory(source)})
    manifest_mod._HASHES.clear()  # a new process: only the manifest knows the hash
    hashed = []
    real = manifest_mod.sha256_file
    monkeypatch.setattr(manifest_mod, "sha256_file", lambda p: hashed.append(Path(p).name) or real(p))
    link_shard(source, 0, linked, 4)
    listed = inventory(linked)
    assert listed["part-00004.parquet"] == read_manifest(source)["files"]["part-00000.parquet"]
    assert "part-00004.parquet" not in hashed  # the shard's bytes were not read again
    assert read_shard(linked / "part-00004.parquet").column("v").to_pylist() == [1, 2, 3]
    # A file replaced under the same name is a new inode: hashed from its bytes.
    write_shard(linked, 4, pa.table({"v": [9]}))
    assert inventory(linked)["part-00004.parquet"]["sha256"] == real(linked / "part-00004.parquet")
    assert "part-00004.parquet" in hashed


def test_the_catalogs_file_check_agrees_with_glob(tmp_path):
    """`_matches_any` (one listing, first match) against `glob.glob`, the reference, on names a data root
    holds: shards, hidden temporaries, sub-folders, plain names, classes, missing folders."""
    from glob import glob

    from storage.catalog_plan import _matches_any

    for name in ("part-00000.parquet", ".part-00001.parquet.1a2b", "metrics.parquet", "report.md"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "topics").mkdir()
    (tmp_path / "topics" / "part-00000.parquet").write_bytes(b"x")
    patterns = [
        "part-*.parquet", "x-*.parquet", ".part-*", "*/part-*.parquet", "metrics.parquet", "gone.parquet",
        "nope/part-*", "[p]art-0000?.parquet", "*", "topic?", "topics/part-*.parquet", "*.md", "*.json",
    ]  # fmt: skip
    for pattern in patterns:
        glob_path = str(tmp_path / pattern)
        assert _matches_any(glob_path) == bool(glob(glob_path)), pattern
