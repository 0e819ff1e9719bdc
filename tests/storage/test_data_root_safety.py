"""A data root is data only, cannot rot unnoticed, survives two runs at once, and a killed `gur`
leaves no trainer behind: one test per finding of the stage-contract review."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gur_cli import main as gur_main
from tests.helpers.flow_runs import DOCS, task_states
from tests.helpers.train_shards import make_shards, run_config

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    return make_shards(tmp_path_factory)


class Payload:
    """Unpickling this creates `path`: the stand-in for a shell command."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.fixture()
def corpus(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS), encoding="utf-8")
    return path


def crafted_result_record(marker: Path) -> bytes:
    """A Prefect result record whose own metadata asks for the pickle serializer."""
    from prefect._internal.result_records import ResultRecord, ResultRecordMetadata
    from prefect.serializers import PickleSerializer

    meta = ResultRecordMetadata(storage_key="x", serializer=PickleSerializer())
    return ResultRecord(metadata=meta, result=Payload(marker)).serialize()


@pytest.mark.usefixtures("prefect_harness")
def test_a_pickle_planted_in_the_data_root_is_never_run(tmp_path, corpus):
    from prefect._internal.result_records import ResultRecord

    from flows.build_pairs import build_pairs

    marker = tmp_path / "pwned"
    record = crafted_result_record(marker)
    ResultRecord.deserialize(record)  # the payload is live: Prefect runs it when it reads the record
    assert marker.exists()
    marker.unlink()

    root = tmp_path / "data"
    first = build_pairs(input_path=str(corpus), root=str(root), workers=1)
    results = root / "prefect-results"
    results.mkdir(exist_ok=True)
    for i in range(64):  # wherever a cache record could be looked up
        (results / f"{i:032x}").write_bytes(record)
    again = build_pairs(input_path=str(corpus), root=str(root), workers=1, return_state=True)
    assert again.result() == first
    assert {k: v for k, v in task_states(again).items() if k != "update-catalog"} == dict.fromkeys(
        ("ingest", "split", "pair", "shuffle"), "Cached"
    )
    assert not marker.exists()
    # Nothing the pipeline wrote is a pickle (protocol 2+ starts with 0x80).
    written = [p for p in root.rglob("*") if p.is_file() and results not in p.parents and p.suffix != ".duckdb"]
    assert written and not [p for p in written if p.read_bytes()[:1] == b"\x80"]


def test_a_checkpoint_holding_code_is_refused(tmp_path):
    import torch

    from models.training.checkpoints import UnsafeCheckpointError, load_checkpoint

    marker = tmp_path / "pwned"
    path = tmp_path / "step-00000009.pt"
    torch.save({"step": 9, "model": {"w": torch.zeros(2)}, "x": Payload(marker)}, path)
    torch.load(path, weights_only=False)  # the payload is live
    assert marker.exists()
    marker.unlink()
    with pytest.raises(UnsafeCheckpointError, match="step-00000009.pt"):
        load_checkpoint(path)
    assert not marker.exists()


@pytest.mark.usefixtures("prefect_harness")
def test_a_damaged_shard_is_found_and_rebuilt_to_the_same_bytes(tmp_path, corpus, capsys):
    from flows.build_pairs import build_pairs

    root = tmp_path / "data"
    refs = build_pairs(input_path=str(corpus), root=str(root), workers=1)
    shuffle_dir, split_dir = root / refs["shards"]["path"], root / refs["sentences"]["path"]
    manifest = json.loads((shuffle_dir / "_manifest.json").read_text())
    shard = next(shuffle_dir.glob("short/part-*.parquet"))
    assert manifest["files"][shard.relative_to(shuffle_dir).as_posix()]["size"] == shard.stat().st_size
    good = shard.read_bytes()

    # 16 bytes overwritten in the middle: same size, so only the hash can tell.
    with open(shard, "r+b") as f:
        f.seek(len(good) // 2)
        f.write(b"\xff" * 16)
    capsys.readouterr()
    assert gur_main(["--root", str(root), "verify"]) == 1
    out = capsys.readouterr().out
    assert "content changed" in out and shard.name in out
    assert not (shuffle_dir / "_manifest.json").exists()

    # A truncated shard of another stage: the cache hit's size check finds it without `verify`.
    sentences = next(split_dir.glob("part-*.parquet"))
    sentences_good = sentences.read_bytes()
    sentences.write_bytes(sentences_good[: len(sentences_good) // 2])

    healed = build_pairs(input_path=str(corpus), root=str(root), workers=1, return_state=True)
    assert healed.result() == refs
    # The damaged stages are recomputed; the healthy ones (pair's input was rebuilt to the same bytes) are reused.
    assert task_states(healed) == {
        "ingest": "Cached",
        "split": "Completed",
        "pair": "Cached",
        "shuffle": "Completed",
        "update-catalog": "Completed",
    }
    assert shard.read_bytes() == good and sentences.read_bytes() == sentences_good
    for folder in (shuffle_dir, split_dir):
        rebuilt = json.loads((folder / "_manifest.json").read_text())["rebuilt"]
        assert len(rebuilt) == 1 and rebuilt[0]["n_problems"] >= 1
    assert gur_main(["--root", str(root), "verify"]) == 0


def _refresh_many(root: str, n: int, errors) -> None:
    from storage.catalog import refresh_catalog

    for _ in range(n):
        try:
            refresh_catalog(Path(root))
        except Exception as exc:  # reported to the parent
            errors.put(f"{type(exc).__name__}: {exc}")


def test_two_processes_updating_one_catalog_both_succeed(tmp_path):
    """Without the lock, DuckDB refuses the second writer ("Could not set lock on file")."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from storage.manifest import write_manifest

    folder = tmp_path / "split" / "abc"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"text": ["x"]}), folder / "part-00000.parquet")
    write_manifest(folder, {"tables": {"sentences": "part-*.parquet"}, "finished_at": 1.0})
    ctx = multiprocessing.get_context("spawn")
    errors = ctx.Queue()
    procs = [ctx.Process(target=_refresh_many, args=(str(tmp_path), 15, errors)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert not found and all(p.exitcode == 0 for p in procs)


@pytest.mark.usefixtures("prefect_harness")
def test_a_busy_catalog_never_fails_a_finished_run(tmp_path, corpus, monkeypatch):
    import functools

    import storage.catalog as catalog
    import tasks.runtime.catalog as catalog_task
    from flows.build_pairs import build_pairs

    root = tmp_path / "data"
    # refresh_catalog's `wait_s` default was bound to WAIT_S (120 s) at import: give up after 0.5 s in the
    # update-catalog task instead, so the run meets a catalog busy throughout (not one freed 60 s later).
    monkeypatch.setattr(catalog_task, "refresh_catalog", functools.partial(catalog.refresh_catalog, wait_s=0.5))
    holder = subprocess.Popen(  # another process in the middle of a catalog update
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from storage.catalog import catalog_lock\n"
            "with catalog_lock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(60)",
            str(root),
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(catalog.CatalogBusyError, match="another run"):
            catalog.refresh_catalog(root, wait_s=0.5)
        state = build_pairs(input_path=str(corpus), root=str(root), workers=1, return_state=True)
        assert state.is_completed()
        assert task_states(state)["update-catalog"] == "Completed"
        assert holder.poll() is None  # the catalog was busy for the whole run
    finally:
        holder.kill()
        holder.wait()
    # Once the lock is free the catalog lists this run's corpus.
    assert gur_main(["--root", str(root), "catalog", "--refresh"]) == 0


PARENT = textwrap.dedent(
    """
    import json, logging, sys
    from pathlib import Path
    from tasks.train.task import run_training
    log = logging.getLogger("parent")
    log.addHandler(logging.StreamHandler(sys.stdout))
    log.setLevel(logging.INFO)
    log.propagate = False
    run_training(Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text()), 1, log)
    """
)


def test_kill_9_of_gur_stops_the_trainer_with_a_checkpoint(shards, tmp_path):
    from models.training.process import TrainerRunningError, lock_holder
    from tasks.train.task import run_training

    out = tmp_path / "run"
    cfg = run_config(shards, out, max_steps=100_000, ckpt_every=100_000, eval_every=0, log_every=1, export=False)
    (tmp_path / "cfg.json").write_text(json.dumps(dataclasses.asdict(cfg)))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(out), str(tmp_path / "cfg.json")],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines = []
        for line in parent.stdout:  # the trainer's lines come through the parent's logger
            lines.append(line)
            if line.startswith("train: step 3 "):
                break
        assert lines and lines[-1].startswith("train: step 3 "), "".join(lines[-20:])
        trainer = lock_holder(out)
        assert trainer and trainer != parent.pid
        with pytest.raises(TrainerRunningError, match=f"pid {trainer}"):
            run_training(out, dataclasses.asdict(cfg), 1, __import__("logging").getLogger("t"))
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.time() + 60
        while lock_holder(out) and time.time() < deadline:
            time.sleep(0.5)
        assert lock_holder(out) is None, "the trainer outlived its parent"
        saved = sorted((out / "checkpoints").glob("step-*.pt"))
        assert saved and int(saved[-1].stem.split("-")[1]) >= 3
    finally:
        parent.kill()
        if pid := lock_holder(out):
            os.kill(pid, signal.SIGKILL)


def test_a_slow_run_checkpoints_by_time_as_well_as_by_steps(shards, tmp_path):
    from models.training.loop import train

    cfg = run_config(shards, tmp_path / "run", max_steps=50, ckpt_every=1000, ckpt_every_s=1e-6, eval_every=0)
    assert train(dataclasses.replace(cfg, stop_at_step=3)) == {"stopped_at": 3}  # as if killed after step 3
    saved = [p.name for p in sorted((tmp_path / "run" / "checkpoints").glob("step-*.pt"))]
    assert saved == ["step-00000001.pt", "step-00000002.pt"]  # keep_checkpoints=2; step 3 is cut off before saving


@pytest.mark.usefixtures("prefect_harness")
def test_an_input_without_documents_is_an_error_unless_allowed(tmp_path):
    from flows.build_pairs import build_pairs
    from tasks.ingest.readers import CorpusError

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / ".DS_Store").write_bytes(b"\x00\x01")
    (folder / "empty.txt").write_text("  \n", encoding="utf-8")
    root = tmp_path / "data"
    with pytest.raises(CorpusError, match="0 documents .*empty_text=1, hidden_file=1.*--allow-empty"):
        build_pairs(input_path=str(folder), root=str(root), workers=1)
    refs = build_pairs(input_path=str(folder), root=str(root), workers=1, allow_empty=True)
    manifest = json.loads((root / refs["documents"]["path"] / "_manifest.json").read_text())
    assert manifest["rows"] == {"documents": 0, "rejects": 2}  # every input file is a document or a reject
