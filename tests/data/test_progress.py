"""Progress a user can read: the line and the ETA as pure functions, pieces that change no output,
and a stage on one large shard that logs while it works (not only when the shard is done)."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from samples.pair_corpus import write_corpus  # noqa: E402
from storage.progress import eta_seconds, format_duration, progress_line  # noqa: E402


def test_format_duration():
    assert [format_duration(s) for s in (0, 42.4, 60, 185, 3600, 7620)] == [
        "0s",
        "42s",
        "1m00s",
        "3m05s",
        "1h00m",
        "2h07m",
    ]


def test_eta_is_the_time_left_at_the_measured_rate():
    assert eta_seconds(50, 200, 100.0) == 300.0  # 0.5 per second, 150 to go
    assert eta_seconds(0, 200, 5.0) is None  # no rate yet
    assert eta_seconds(200, 200, 100.0) == 0.0


def test_progress_line():
    assert (
        progress_line("pair", 57, 200, 114.0, "sentences")
        == "pair: 57/200 sentences (28%, 0.5/s, 1m54s in, ETA 4m46s)"
    )
    assert progress_line("pair", 200, 200, 100.0, "sentences") == "pair: 200/200 sentences (100%, 2.0/s, 1m40s in)"
    assert progress_line("ingest records", 5000, None, 2.0) == "ingest records: 5000 (2,500/s, 2s in)"
    assert progress_line("pair", 0, 200, 3.0) == "pair: 0/200 (0%, 0.0/s, 3s in, ETA ?)"
    assert progress_line("shuffle", 0, None, 75.0) == "shuffle: working (1m15s in)"  # nothing to count
    # 100 done by an earlier (killed) run: the rate and the ETA count only this run's 50 in 10 s.
    assert progress_line("split", 150, 200, 10.0, "documents", skipped=100) == (
        "split: 150/200 documents (75%, 5.0/s, 10s in, ETA 10s)"
    )


@pytest.fixture(scope="module")
def one_shard(tmp_path_factory):
    """A data root with one documents shard of 300 documents and its sentences shard."""
    from tasks.ingest.documents import IngestConfig
    from tasks.ingest.task import ingest
    from tasks.split.sentences import SplitConfig
    from tasks.split.task import split

    base = tmp_path_factory.mktemp("one-shard")
    corpus = write_corpus(base / "corpus.jsonl", n_docs=300)
    root = str(base / "data")
    documents = ingest.fn(str(corpus), IngestConfig(docs_per_shard=1000), root)
    sentences = split.fn(documents, SplitConfig(), root, workers=1)
    return base / "data", documents, sentences


def test_pieces_give_the_same_pairs_and_counts_as_one_call(one_shard):
    from tasks.pair.candidates import PairConfig
    from tasks.pair.shards import pair_pieces
    from tasks.pair.table import pair_table

    root, _, sentences = one_shard
    table = pq.read_table(root / sentences["path"] / "part-00000.parquet")
    whole, counts = pair_table(table, PairConfig())
    reports = []
    pieces, piece_counts = pair_pieces(table, PairConfig(), max_rows=100, report=reports.append)
    assert len(reports) > 5 and sum(reports) == table.num_rows
    assert pieces.equals(whole) and piece_counts == counts and counts["pairs"] > 0


def test_split_pieces_write_the_same_bytes(one_shard, tmp_path, monkeypatch):
    import tasks.split.sentences as split_sentences

    root, documents, _ = one_shard
    shard = str(root / documents["path"] / "part-00000.parquet")
    whole = split_sentences.split_shard(shard, str(tmp_path / "whole"), 0, split_sentences.SplitConfig())
    monkeypatch.setattr(split_sentences, "PIECE_DOCUMENTS", 7)
    reports = []
    pieces = split_sentences.split_shard(
        shard, str(tmp_path / "pieces"), 0, split_sentences.SplitConfig(), reports.append
    )
    assert pieces == whole and sum(reports) == 300 and len(reports) == 43
    for name in ("part-00000.parquet", "_stats/00000.json"):
        assert (tmp_path / "pieces" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()


def test_pair_on_one_large_shard_logs_while_it_works(one_shard, tmp_path, monkeypatch, caplog):
    import storage.progress
    import tasks.pair.shards
    from tasks.pair.candidates import PairConfig
    from tasks.pair.task import pair

    root, _, sentences = one_shard
    monkeypatch.setattr(storage.progress, "LOG_EVERY_S", 0.0)
    monkeypatch.setattr(tasks.pair.shards, "PIECE_SENTENCES", 300)
    work = tmp_path / "data"
    work.mkdir()
    (work / "split").symlink_to(root / "split")
    with caplog.at_level(logging.INFO, logger="tasks.pair.task"):
        pair.fn(sentences, PairConfig(seed=1), str(work), workers=1)
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.getMessage().startswith("pair: ") and " sentences (" in r.getMessage()
    ]
    total = int(lines[-1].split("/")[1].split()[0])
    assert len(lines) >= 5, lines  # pieces of ~300 sentences: progress inside the one shard
    assert "ETA" in lines[0] and f"/{total} sentences (" in lines[0] and not lines[0].startswith(f"pair: {total}/")
    assert lines[-1].startswith(f"pair: {total}/{total} sentences (100%") and "pairs=" in lines[-1]


def report_three(in_path: str, out_dir: str, index: int, config, report=None) -> dict[str, int]:
    """A stand-in worker for the spawned pool: three reports of `index + 1` units each."""
    from storage.shards import write_shard_stats

    for _ in range(3):
        report(index + 1)
    write_shard_stats(Path(out_dir), index, {"n": 1})
    (Path(out_dir) / "_done").mkdir(exist_ok=True)
    return {"n": 1}


def test_spawned_workers_report_through_the_queue(tmp_path, monkeypatch):
    import tasks.runtime.map_shards as pool
    from tasks.runtime.map_shards import map_shards

    monkeypatch.setattr(pool, "MIN_BYTES_PER_WORKER", 0)  # no input files here: spawn whatever their size

    counts, shards = [], []
    inputs = [tmp_path / f"in-{i}" for i in range(3)]
    map_shards(
        report_three, inputs, tmp_path / "out", None, workers=2, on_shard=shards.append, on_progress=counts.append
    )
    assert sorted(counts) == [1, 1, 1, 2, 2, 2, 3, 3, 3] and len(shards) == 3


def test_heartbeat_logs_while_no_unit_is_done(caplog):
    import time

    from storage.progress import Progress

    logger = logging.getLogger("heartbeat-test")
    with caplog.at_level(logging.INFO, logger="heartbeat-test"):
        with Progress("pair", 10, logger, every_s=1.0, unit="sentences", heartbeat=True):
            time.sleep(1.8)  # a first piece that compiles the kernels
        quiet = len(caplog.records)
        time.sleep(1.2)
    first = caplog.records[0].getMessage()
    assert quiet >= 1 and first.startswith("pair: 0/10 sentences (0%, 0.0/s, ") and first.endswith(" in, ETA ?)")
    assert len(caplog.records) == quiet  # the heartbeat stopped with the block
