"""The build-pairs flow under one Prefect test harness: outputs, cache hits, self-healing."""

from __future__ import annotations

import json
import shutil

import duckdb
import pytest

from gur_cli import main as gur_main
from tests.helpers.flow_runs import DOCS, task_states

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture()
def corpus(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS), encoding="utf-8")
    return path


def test_flow_writes_tables_caches_and_heals(tmp_path, corpus):
    from flows.build_pairs import build_pairs

    root = tmp_path / "data"
    state = build_pairs(input_path=str(corpus), root=str(root), workers=1, return_state=True)
    result = state.result()
    states = task_states(state)
    assert set(states.values()) == {"Completed"}
    assert set(states) == {"ingest", "split", "pair", "shuffle", "update-catalog"}
    con = duckdb.connect(str(root / "catalog.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM documents").fetchone() == (2,)
    assert con.execute("SELECT reason FROM rejects").fetchall() == [("empty_text",)]
    sentences = con.execute("SELECT text FROM sentences ORDER BY doc_id, sent_id").fetchall()
    con.close()
    assert ("模型需要数据。",) in sentences and ("Edges link nodes.",) in sentences
    con = duckdb.connect(str(root / "catalog.duckdb"), read_only=True)
    shards = con.execute("SELECT a, b, lcs, bucket FROM shards ORDER BY shuffle_key").fetchall()
    con.close()
    # "a graph has " weighs 8 letters * 3 + 3 spaces... = 30 (kept); "graph" in the title only 15.
    # "数据" and "模型" weigh 20, enough between short sentences (total weight <= 150).
    assert sorted(shards) == [
        ("A graph has nodes.", "A graph has edges.", "a graph has ", "short"),
        ("模型", "模型需要数据。", "模型", "short"),
        ("模型需要数据。", "数据来自文档！", "数据", "short"),
    ]
    manifest = json.loads((root / result["documents"]["path"] / "_manifest.json").read_text())
    assert manifest["rows"] == {"documents": 2, "rejects": 1} and manifest["drops"] == {"empty_text": 1}

    # Same inputs and config: every stage comes from the cache.
    again = build_pairs(input_path=str(corpus), root=str(root), workers=1, return_state=True)
    assert {k: v for k, v in task_states(again).items() if k != "update-catalog"} == dict.fromkeys(
        ("ingest", "split", "pair", "shuffle"), "Cached"
    )
    assert again.result() == result

    # A deleted output is noticed and rebuilt, byte for byte.
    split_dir = root / result["sentences"]["path"]
    before = (split_dir / "part-00000.parquet").read_bytes()
    shutil.rmtree(split_dir)
    healed = build_pairs(input_path=str(corpus), root=str(root), workers=1, return_state=True)
    assert healed.result() == result
    assert (split_dir / "part-00000.parquet").read_bytes() == before
    assert task_states(healed) == {  # only the deleted stage was recomputed
        "ingest": "Cached",
        "split": "Completed",
        "pair": "Cached",
        "shuffle": "Cached",
        "update-catalog": "Completed",
    }

    # An edited corpus misses the cache and lands in a new folder; the old one is kept.
    corpus.write_text(corpus.read_text(encoding="utf-8") + json.dumps({"text": "New doc."}) + "\n", encoding="utf-8")
    changed = build_pairs(input_path=str(corpus), root=str(root), workers=1, return_state=True)
    assert task_states(changed)["ingest"] == "Completed"
    assert changed.result()["documents"] != result["documents"]
    assert (root / result["documents"]["path"] / "_manifest.json").exists()


def test_gur_sql_prints_a_table(tmp_path, corpus, capsys):
    root = tmp_path / "data"
    assert gur_main(["--root", str(root), "build-pairs", str(corpus), "--workers", "1"]) == 0
    capsys.readouterr()
    assert gur_main(["--root", str(root), "sql", "SELECT count(*) AS n FROM sentences WHERE is_title"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].strip() == "n" and out.splitlines()[2].strip() == "2"


def test_catalog_shows_the_corpus_of_the_latest_run_even_when_it_was_cached(tmp_path, corpus):
    from flows.build_pairs import build_pairs

    root = tmp_path / "data"
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": 9, "text": "A graph has nodes. A graph has edges."}) + "\n", encoding="utf-8")

    def views() -> tuple:
        with duckdb.connect(str(root / "catalog.duckdb"), read_only=True) as con:
            tables = ("documents", "pairs", "shards")
            return tuple(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables)

    build_pairs(input_path=str(corpus), root=str(root), workers=1)
    first = views()
    assert first == (2, 3, 3)  # the three pairs of the flow test above, none a duplicate
    build_pairs(input_path=str(other), root=str(root), workers=1)
    assert views() == (1, 1, 1)  # (a build without pairs never replaces one with pairs: test_catalog_builds.py)
    cached = build_pairs(input_path=str(corpus), root=str(root), workers=1, return_state=True)
    assert {k: v for k, v in task_states(cached).items() if k != "update-catalog"} == dict.fromkeys(
        ("ingest", "split", "pair", "shuffle"), "Cached"
    )
    assert views() == first


def test_pair_options_reach_the_pair_stage_and_unknown_ones_are_named(tmp_path, corpus):
    from flows.build_pairs import build_pairs

    root = tmp_path / "data"
    strict = build_pairs(input_path=str(corpus), root=str(root), workers=1, pair_options={"min_weight_small": 25})
    with duckdb.connect(str(root / "catalog.duckdb"), read_only=True) as con:
        kept = sorted(row[0] for row in con.execute("SELECT lcs FROM pairs").fetchall())
    assert kept == ["a graph has "]  # the CJK pairs weigh 20, now under the threshold
    manifest = json.loads((root / strict["pairs"]["path"] / "_manifest.json").read_text())
    assert manifest["config"]["min_weight_small"] == 25
    with pytest.raises(ValueError, match="min_wieght.*known: .*min_weight"):
        build_pairs(input_path=str(corpus), root=str(root), workers=1, pair_options={"min_wieght": 10})


def test_shuffle_options_are_checked_before_any_stage_runs(tmp_path, corpus):
    from flows.build_pairs import build_pairs

    root = tmp_path / "data"
    with pytest.raises(ValueError, match="shard_compression must be one of snappy, zstd"):
        build_pairs(input_path=str(corpus), root=str(root), workers=1, shard_compression="zsdt")
    with pytest.raises(ValueError, match="memory_limit must look like"):
        build_pairs(input_path=str(corpus), root=str(root), workers=1, memory_limit="lots")
    assert not list(root.rglob("*.parquet"))  # nothing was ingested


def test_gur_errors_are_one_line(tmp_path, capsys):
    assert gur_main(["--root", str(tmp_path / "empty"), "sql", "SELECT 1"]) == 1
    assert "no catalog at" in capsys.readouterr().err
    assert gur_main(["--root", str(tmp_path), "build-pairs", str(tmp_path / "missing.jsonl")]) == 1
    assert "missing.jsonl" in capsys.readouterr().err
    (tmp_path / "x.jsonl").write_text('{"text": "a"}\n', encoding="utf-8")  # the input is checked first
    assert gur_main(["--root", str(tmp_path), "build-pairs", str(tmp_path / "x.jsonl"), "--memory-limit", "1MB"]) == 1
    assert capsys.readouterr().err.startswith("gur: error: memory_limit must be at least 16MB")


def test_two_phase_shuffle_flow_matches_the_single_machine_task(tmp_path, corpus):
    from flows.build_pairs import build_pairs
    from flows.shuffle_pairs import shuffle_pairs
    from tasks.shuffle.phases import ShuffleConfig

    lines = [
        json.dumps({"title": f"T{i}", "text": f"Shared words number {i} here. Shared words number {i} too."})
        for i in range(60)
    ]
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    one = tmp_path / "one"
    result = build_pairs(input_path=str(corpus), root=str(one), workers=1, rows_per_shard=7)
    two = tmp_path / "two"
    shutil.copytree(one / result["pairs"]["path"], two / result["pairs"]["path"])
    ref = shuffle_pairs(result["pairs"], ShuffleConfig(rows_per_shard=7, partitions=4), root=str(two))
    assert ref == result["shards"]
    files = sorted(p.relative_to(one) for p in (one / ref["path"]).rglob("part-*.parquet"))
    assert len(files) > 2
    assert files == sorted(p.relative_to(two) for p in (two / ref["path"]).rglob("part-*.parquet"))
    assert all((one / f).read_bytes() == (two / f).read_bytes() for f in files)
    manifest = json.loads((two / ref["path"] / "_manifest.json").read_text())
    assert manifest["partitions"] == 4 and not (two / ref["path"] / "_work").exists()
