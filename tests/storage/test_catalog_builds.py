"""The catalog per build: `main` consistent across runs of other corpora, every build queryable by its
schema, empty builds never the default, every evaluation in `metrics`, polars frames over the same
files, and the pinned DuckDB CLI opening the catalog."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gur_cli import main as gur_main
from storage.catalog import refresh_catalog
from storage.manifest import write_manifest
from storage.open_table import open_table
from storage.shards import write_shard
from storage.stage_output import StageOutput, latest_ref
from tests.helpers.flow_runs import DOCS

QUESTIONS = [
    "how to sort a list in python",
    "python list sort by key",
    "sort python dictionary by value",
    "java string to int conversion",
    "convert string to int in java",
    "java int parse string",
    "git undo last commit",
    "git revert a pushed commit",
    "undo git add before commit",
]


@pytest.fixture()
def corpus(tmp_path):
    path = tmp_path / "wiki.jsonl"
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS), encoding="utf-8")
    return path


@pytest.fixture()
def questions(tmp_path):
    path = tmp_path / "questions.jsonl"
    rows = [{"id": i, "text": q} for i, q in enumerate(QUESTIONS)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def query(root: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(root / "catalog.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


def builds(root: Path) -> dict[str, tuple]:
    return {
        schema: (kind, in_main, rows)
        for schema, kind, in_main, rows in query(root, 'SELECT "schema", kind, in_main, "rows" FROM builds')
    }


def same_rows(root: Path, view: str, build: str | None = None) -> int:
    """The polars frame and the DuckDB view hold the same rows; returns how many."""
    qualified = f'"{build}"."{view}"' if build else f'"{view}"'
    with duckdb.connect(str(root / "catalog.duckdb"), read_only=True) as con:
        expected = con.execute(f"SELECT * FROM {qualified}").arrow().read_all().to_pylist()
    got = open_table(view, root, build).collect().to_arrow().to_pylist()

    def key(row):
        return json.dumps(row, sort_keys=True, default=str)

    assert sorted(map(key, got)) == sorted(map(key, expected)), view
    return len(got)


@pytest.mark.usefixtures("prefect_harness")
def test_main_keeps_one_build_while_another_corpus_is_mined(tmp_path, corpus, questions):
    from flows.build_pairs import build_pairs
    from flows.mine_keywords import mine_keywords

    root = tmp_path / "data"
    built = build_pairs(input_path=str(corpus), root=str(root), workers=1)
    mined = mine_keywords(input_path=str(questions), k=3, n_iters=5, root=str(root))
    found = builds(root)
    build_schema = next(s for s, (kind, _, _) in found.items() if kind == "build")
    kw_schema = next(s for s, (kind, _, _) in found.items() if kind == "keywords")
    assert build_schema == f"wiki_{built['shards']['fingerprint'][:8]}"
    assert kw_schema == f"questions_kw_{mined['fingerprint'][:8]}"
    assert found[build_schema] == ("build", True, 3) and found[kw_schema] == ("keywords", True, len(QUESTIONS))

    # main: documents, sentences and pairs all still from the wiki build, so joins find their rows
    assert query(root, "SELECT count(*) FROM documents") == [(2,)]
    joined = "SELECT count(*) FROM pairs JOIN sentences s ON s.doc_id = pairs.doc_id AND s.sent_id = a_sent_id"
    assert query(root, joined) == [(3,)]
    assert query(root, "SELECT count(*) FROM pairs JOIN documents USING (doc_id)") == [(3,)]
    # the keywords join the documents they were mined from, in their own schema
    assert query(root, f"SELECT count(*) FROM keywords JOIN {kw_schema}.documents USING (doc_id)") == [
        (len(QUESTIONS),)
    ]
    assert query(root, f"SELECT count(*) FROM {kw_schema}.keywords") == [(len(QUESTIONS),)]
    assert query(root, f"SELECT count(*) FROM {build_schema}.shards") == [(3,)]

    stages = "SELECT stage, count(*) FROM {}manifests GROUP BY stage ORDER BY stage"
    one_build = [("ingest", 1), ("pair", 1), ("shuffle", 1), ("split", 1)]
    assert query(root, stages.format(f"{build_schema}.")) == one_build
    both = [("ingest", 2), ("keywords", 1), ("pair", 1), ("shuffle", 1), ("split", 1)]  # main: the build + keywords
    assert query(root, stages.format("")) == both
    dedup = "SELECT rows->>'rows_out', false_negatives IS NOT NULL FROM manifests WHERE stage = 'shuffle'"
    assert query(root, dedup) == [("3", True)]

    for view in ("documents", "rejects", "sentences", "pairs", "shards", "shards_short", "keywords", "topics"):
        assert same_rows(root, view) > 0
    assert same_rows(root, "documents", kw_schema) == len(QUESTIONS)
    with pytest.raises(KeyError, match="known: "):
        open_table("no_such_view", root)

    out = io.StringIO()  # not capsys: Prefect's log handler would keep its stream after the test
    with contextlib.redirect_stdout(out):
        assert gur_main(["--root", str(root), "catalog"]) == 0
    listed = {line.split()[0]: line.split()[1] for line in out.getvalue().splitlines()[3:-1]}
    assert listed["documents"] == "2" and listed[f"{kw_schema}.documents"] == str(len(QUESTIONS))


@pytest.mark.usefixtures("prefect_harness")
def test_a_flow_logs_the_views_over_its_own_outputs_not_every_view(tmp_path, corpus, questions):
    """A night runs six flows: each lists the views it feeds, and counts the rest in one line."""
    from flows.build_pairs import build_pairs
    from flows.mine_keywords import mine_keywords
    from tasks.runtime.catalog import update_catalog

    root = tmp_path / "data"
    build_pairs(input_path=str(corpus), root=str(root), workers=1)
    mined = mine_keywords(input_path=str(questions), k=3, n_iters=5, root=str(root))
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append  # not caplog: Prefect's logging setup stops propagation to the root logger
    logger = logging.getLogger("tasks.runtime.catalog")  # outside a flow run the task logs here
    level, logger.level = logger.level, logging.INFO
    logger.addHandler(handler)
    try:
        shown = update_catalog.fn(str(root), [mined])
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    listed = {r.args[0] for r in records if r.msg.startswith("catalog view")}
    assert listed == {"keywords", "topics", "topic_sweep"}  # the keywords output's views, not the build's
    assert {"documents", "pairs", "shards"} <= set(shown)  # every view is still in `main`
    assert any(r.getMessage().startswith(f"catalog: {len(shown)} views in `main` (3 over") for r in records)


@pytest.mark.usefixtures("prefect_harness")
def test_an_empty_build_is_queryable_but_never_the_default(tmp_path, corpus):
    from flows.build_pairs import build_pairs

    root = tmp_path / "data"
    good = build_pairs(input_path=str(corpus), root=str(root), workers=1)
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    empty = build_pairs(input_path=str(empty_dir), format="textdir", root=str(root), workers=1, allow_empty=True)
    assert empty["shards"] != good["shards"]
    found = builds(root)
    assert sorted(found.values()) == [("build", False, 0), ("build", True, 3)]
    assert query(root, "SELECT count(*) FROM documents") == [(2,)]
    assert query(root, "SELECT count(*) FROM shards") == [(3,)]
    assert latest_ref(root, "shuffle") == good["shards"]  # what `gur train` reads by default

    # A corpus with documents but no pairs is empty for training too.
    lonely = tmp_path / "lonely.jsonl"
    lonely.write_text(json.dumps({"id": 9, "text": "One lonely document."}) + "\n", encoding="utf-8")
    build_pairs(input_path=str(lonely), root=str(root), workers=1)
    assert query(root, "SELECT count(*) FROM documents") == [(2,)]
    lonely_schema = next(s for s in builds(root) if s.startswith("lonely_"))
    assert query(root, f"SELECT count(*) FROM {lonely_schema}.documents") == [(1,)]
    assert latest_ref(root, "shuffle") == good["shards"]


def test_latest_ref_skips_outputs_without_rows(tmp_path):
    for fp, finished, rows in (("full", 1.0, 5), ("empty", 2.0, 0)):
        write_manifest(
            tmp_path / "shuffle" / fp, {"stage": "shuffle", "finished_at": finished, "rows": {"rows_out": rows}}
        )
    assert latest_ref(tmp_path, "shuffle")["fingerprint"] == "full"
    shutil.rmtree(tmp_path / "shuffle" / "full")
    with pytest.raises(FileNotFoundError, match="no complete 'shuffle' output with rows"):
        latest_ref(tmp_path, "shuffle")


def _evaluation(root: Path, fp: str, finished: float, rows: list[tuple]) -> None:
    out = root / "evaluate" / fp
    table = pa.Table.from_pylist(
        [
            {"model": m, "dataset": "so", "task": "qr", "metric": "precision", "k": 1, "value": v, "created_at": t}
            for m, v, t in rows
        ]
    )
    write_shard(out, 0, table)
    write_manifest(out, {"stage": "evaluate", "finished_at": finished, "tables": {"metrics": "part-*.parquet"}})


def test_metrics_hold_every_evaluation_and_metrics_latest_the_newest(tmp_path):
    day1, day2 = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)
    _evaluation(tmp_path, "monday", 1.0, [("bm25", 0.5, day1), ("model-a", 0.6, day1)])
    # Tuesday: a new model next to bm25's unit reused from Monday (the same row) and a re-run of model-a.
    _evaluation(tmp_path, "tuesday", 2.0, [("bm25", 0.5, day1), ("model-b", 0.7, day2), ("model-a", 0.65, day2)])
    refresh_catalog(tmp_path)
    all_rows = "SELECT model, value FROM metrics ORDER BY model, value"
    assert query(tmp_path, all_rows) == [("bm25", 0.5), ("model-a", 0.6), ("model-a", 0.65), ("model-b", 0.7)]
    latest = "SELECT model, value FROM metrics_latest ORDER BY model"
    assert query(tmp_path, latest) == [("bm25", 0.5), ("model-a", 0.65), ("model-b", 0.7)]
    assert same_rows(tmp_path, "metrics") == 4
    assert same_rows(tmp_path, "metrics_latest") == 3


def test_a_catalog_from_another_duckdb_version_is_rebuilt(tmp_path, monkeypatch):
    import storage.catalog as catalog

    _evaluation(tmp_path, "monday", 1.0, [("bm25", 0.5, datetime(2026, 1, 1, tzinfo=UTC))])
    (tmp_path / "catalog.duckdb").write_bytes(b"written by DuckDB 2.0")
    connect, calls = duckdb.connect, []

    def newer_file(path, *args, **kwargs):  # what DuckDB 1.5 says about a 2.x file, once
        calls.append(path)
        if len(calls) == 1:
            raise duckdb.IOException(
                "IO Error: Trying to read a database file with version number 69, "
                "but we can only read versions between 64 and 68."
            )
        return connect(path, *args, **kwargs)

    monkeypatch.setattr(catalog.duckdb, "connect", newer_file)
    refresh_catalog(tmp_path)
    monkeypatch.undo()
    assert len(calls) == 2
    assert query(tmp_path, "SELECT count(*) FROM metrics") == [(1,)]


def duckdb_cli() -> Path:
    found = Path(sys.executable).parent / "duckdb"
    if not found.exists():
        found = Path(shutil.which("duckdb") or found)
    if not found.exists():
        pytest.skip("the DuckDB CLI is not installed (pip install -e '.[cli]')")
    return found


@pytest.mark.usefixtures("prefect_harness")
def test_the_duckdb_cli_opens_the_catalog(tmp_path, corpus):
    from flows.build_pairs import build_pairs

    cli = duckdb_cli()
    version = subprocess.run([str(cli), "--version"], capture_output=True, text=True, check=True).stdout
    assert version.startswith(f"v{duckdb.__version__} "), (version, duckdb.__version__)
    root = tmp_path / "data"
    build_pairs(input_path=str(corpus), root=str(root), workers=1)
    sql = "SELECT reason, count(*) AS n FROM rejects GROUP BY reason; SELECT count(*) AS n FROM builds;"
    done = subprocess.run(
        [str(cli), "-readonly", "-csv", str(root / "catalog.duckdb"), "-c", sql],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["reason,n", "empty_text,1", "n", "1"]

    # A session left open (as people do) never blocks the next run's catalog update.
    session = subprocess.Popen([str(cli), "-readonly", str(root / "catalog.duckdb")], stdin=subprocess.PIPE)
    try:
        time.sleep(1)
        assert session.poll() is None
        started = time.monotonic()
        refresh_catalog(root, wait_s=5)
        assert time.monotonic() - started < 5
        assert query(root, "SELECT count(*) FROM documents") == [(2,)]
    finally:
        session.communicate(b".quit\n", timeout=30)


def _output(root: Path, stage: str, fp: str, upstream: list[dict], inputs: dict, config: dict, tables: dict, **rows):
    """A complete stage output through the stages' own `StageOutput.finish` (manifest with inventory)."""
    return StageOutput.open(root, stage, fp).finish(
        code_version="test", config=config, inputs=inputs, upstream=upstream, tables=tables, rows=rows, drops={}
    )


def _source(root: Path, fp: str, path: str) -> dict:
    write_shard(root / "ingest" / fp, 0, pa.table({"doc_id": [1, 2], "text": ["a", "b"]}))
    return _output(root, "ingest", fp, [], {"path": path}, {}, {"documents": "part-*.parquet"}, documents=2)


def _train(root: Path, fp: str, source: dict, method: str, losses: list[dict] | None) -> dict:
    if losses is not None:  # a run that logged nothing writes no metrics.parquet
        (root / "train" / fp).mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(losses), root / "train" / fp / "metrics.parquet")
    upstream = [source] if source["stage"] != "file" else []
    tables = {"train_metrics": "metrics.parquet"}
    return _output(root, "train", fp, upstream, {source["stage"]: source["path"]}, {"method": method}, tables, steps=2)


def test_train_metrics_hold_every_run_and_join_the_build_it_trained_on(tmp_path):
    wiki = _source(tmp_path, "ingest-wiki", "/corpora/wiki.jsonl")
    shards = _output(tmp_path, "shuffle", "shufflefp1", [wiki], {}, {}, {}, rows_out=3)
    questions = _source(tmp_path, "ingest-questions", "/corpora/questions.jsonl")
    keywords = _output(tmp_path, "keywords", "keywordsfp1", [questions], {}, {}, {}, keywords=9)
    file = {"stage": "file", "fingerprint": "filefp", "path": "/corpora/titles.tsv"}
    _train(tmp_path, "gurrun1", shards, "gur", [{"step": 1, "loss": 2.0, "lm_loss": 1.5}, {"step": 2, "loss": 1.0}])
    _train(tmp_path, "tfcsgrun1", keywords, "tfcsg", [{"step": 1, "loss": 3.0, "kw_loss": 0.5}])
    _train(tmp_path, "simcserun1", file, "simcse", [{"step": 1, "loss": 4.0}])
    _train(tmp_path, "emptyrun", shards, "gur", None)
    refresh_catalog(tmp_path)

    found = {s: fp for s, fp in query(tmp_path, 'SELECT "schema", fingerprint FROM builds')}
    assert found == {"wiki_shufflef": "shufflefp1", "questions_kw_keywords": "keywordsfp1"}
    rows = query(
        tmp_path,
        "SELECT train_fingerprint, method, input_stage, input_fingerprint, step, loss, lm_loss, kw_loss "
        "FROM train_metrics ORDER BY train_fingerprint, step",
    )
    assert rows == [
        ("gurrun1", "gur", "shuffle", "shufflefp1", 1, 2.0, 1.5, None),
        ("gurrun1", "gur", "shuffle", "shufflefp1", 2, 1.0, None, None),
        ("simcserun1", "simcse", "file", None, 1, 4.0, None, None),
        ("tfcsgrun1", "tfcsg", "keywords", "keywordsfp1", 1, 3.0, None, 0.5),
    ]
    joined = (
        'SELECT b."schema", b.kind, t.train_fingerprint, t.step, t.loss FROM train_metrics t '
        "JOIN builds b ON b.fingerprint = t.input_fingerprint ORDER BY t.train_fingerprint, t.step"
    )
    assert query(tmp_path, joined) == [
        ("wiki_shufflef", "build", "gurrun1", 1, 2.0),
        ("wiki_shufflef", "build", "gurrun1", 2, 1.0),
        ("questions_kw_keywords", "keywords", "tfcsgrun1", 1, 3.0),
    ]
    # the keywords' own documents sit in the schema the training run joins to
    assert query(tmp_path, "SELECT count(*) FROM questions_kw_keywords.documents") == [(2,)]
    files = query(tmp_path, "SELECT files, file_columns FROM catalog_views WHERE view_name = 'train_metrics'")
    assert len(files) == 1 and len(files[0][0]) == 3
    assert [c["train_fingerprint"] for c in json.loads(files[0][1])] == ["gurrun1", "tfcsgrun1", "simcserun1"]
    same_rows(tmp_path, "train_metrics")  # polars' frame carries the same run columns as the view


def _catalog_snapshot(root: Path) -> dict:
    """Every view's SQL and rows, and the two tables: what a reader of the catalog can tell apart."""
    with duckdb.connect(str(root / "catalog.duckdb"), read_only=True) as con:
        views = con.execute(
            "SELECT schema_name, view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY 1, 2"
        ).fetchall()
        rows = {
            f"{schema}.{name}": sorted(map(str, con.execute(f'SELECT * FROM "{schema}"."{name}"').fetchall()))
            for schema, name, _ in views
        }
        tables = {
            t: sorted(map(str, con.execute(f"SELECT * FROM {t}").fetchall())) for t in ("builds", "catalog_views")
        }
        # The columns a view was bound with (what DESCRIBE and SQL tools list), not the ones a query finds.
        columns = con.execute(
            "SELECT table_schema, table_name, column_name, data_type FROM information_schema.columns ORDER BY ALL"
        ).fetchall()
    return {"views": views, "rows": rows, "tables": tables, "columns": columns}


def test_a_refresh_updates_the_catalog_it_wrote_and_equals_a_whole_rebuild(tmp_path, monkeypatch):
    import storage.catalog as catalog

    wiki = _source(tmp_path, "ingest-wiki", "/corpora/wiki.jsonl")
    first = _output(tmp_path, "shuffle", "firstfp1", [wiki], {}, {}, {}, rows_out=3)
    _train(tmp_path, "run1", first, "gur", [{"step": 1, "loss": 2.0}])
    _evaluation(tmp_path, "monday", 1.0, [("bm25", 0.5, datetime(2026, 1, 1, tzinfo=UTC))])
    promotions = tmp_path / "models" / "promotions"
    write_shard(promotions, 0, pa.table({"decision": ["refused"]}))
    write_manifest(promotions, {"stage": "promotions", "tables": {"promotions": "part-*.parquet"}, "finished_at": 1.0})
    refresh_catalog(tmp_path)

    made = []
    write = catalog._write

    def counting(con, plan, old=None, content=None):
        made.append(old is not None)
        return write(con, plan, old, content)

    monkeypatch.setattr(catalog, "_write", counting)
    # A night later: a second build, a run and an evaluation more, a promotions row with a new column (its
    # view must be bound again), and the first build's shuffle gone (its schema goes).
    second = _output(tmp_path, "shuffle", "secondfp2", [wiki], {}, {}, {}, rows_out=4)
    _train(tmp_path, "run2", second, "gur", [{"step": 1, "loss": 1.0, "lm_loss": 0.5}])
    _evaluation(tmp_path, "tuesday", 2.0, [("model-a", 0.7, datetime(2026, 1, 2, tzinfo=UTC))])
    write_shard(promotions, 1, pa.table({"decision": ["promoted"], "gc": ["freed 1 MB"]}))
    shutil.rmtree(tmp_path / "shuffle" / "firstfp1")
    refresh_catalog(tmp_path)
    assert made == [True]  # a copy of the catalog, updated
    updated = _catalog_snapshot(tmp_path)
    assert updated["rows"]["main.promotions"] == ["('promoted', 'freed 1 MB')", "('refused', None)"]
    assert ("main", "promotions", "gc", "VARCHAR") in updated["columns"]
    assert [v for v in updated["views"] if v[0] == "wiki_firstfp1"] == []
    assert query(tmp_path, "SELECT count(*) FROM metrics_latest") == [(2,)]

    (tmp_path / catalog.MAIN).unlink()  # no sidecar: the next refresh writes the catalog whole
    refresh_catalog(tmp_path)
    assert made == [True, False]
    assert _catalog_snapshot(tmp_path) == updated

    (tmp_path / "catalog.duckdb").write_bytes((tmp_path / "catalog.duckdb").read_bytes())  # another file now
    refresh_catalog(tmp_path)
    assert made == [True, False, False]  # a catalog someone else wrote is never updated in place

    # Nothing new: the same views and tables, so the file is left as it is (readers keep their file).
    before = os.stat(tmp_path / "catalog.duckdb")
    refresh_catalog(tmp_path)
    assert made == [True, False, False]
    after = os.stat(tmp_path / "catalog.duckdb")
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    # Only a table changes (the build made again, finished later; no view's SQL changes): it is written.
    manifest = json.loads((tmp_path / "shuffle" / "secondfp2" / "_manifest.json").read_text())
    manifest["finished_at"] += 60
    (tmp_path / "shuffle" / "secondfp2" / "_manifest.json").write_text(json.dumps(manifest))
    refresh_catalog(tmp_path)
    assert made == [True, False, False, True]
    ((written,),) = query(tmp_path, "SELECT epoch(finished_at) FROM builds WHERE output = 'shuffle/secondfp2'")
    assert written == pytest.approx(manifest["finished_at"], abs=1e-5)  # TIMESTAMPTZ: microseconds
    assert _catalog_snapshot(tmp_path)["views"] == updated["views"]
