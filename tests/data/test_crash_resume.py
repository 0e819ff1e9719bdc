"""Kill a run mid-stage (SIGKILL, in a subprocess), rerun, and get the same bytes as a clean run."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import REPO

RUN = """
import sys
from pathlib import Path
from storage.shards import finished_shards
from tasks.ingest.documents import IngestConfig, ingest_corpus
from tasks.ingest.readers import ReaderConfig
from tasks.pair.candidates import PairConfig
from tasks.pair.shards import pair_all
from tasks.split.sentences import SplitConfig, split_all
src, root = Path(sys.argv[1]), Path(sys.argv[2])
ingest_corpus(src, IngestConfig(ReaderConfig(), "c", docs_per_shard=150), root / "ingest")
split_all(finished_shards(root / "ingest"), root / "split", SplitConfig(), workers=1)
pair_all(finished_shards(root / "split"), root / "pair", PairConfig(), workers=1)
(root / "finished").touch()
"""


def make_corpus(path: Path, n_docs: int = 15000) -> None:
    rng = random.Random(7)
    words = "alpha beta gamma delta graph model token sentence paper 模型 数据 训练".split()
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n_docs):
            sentences = [" ".join(rng.choices(words, k=rng.randint(4, 15))).capitalize() + "." for _ in range(6)]
            f.write(json.dumps({"id": i, "title": f"Doc {i}", "text": " ".join(sentences)}, ensure_ascii=False) + "\n")


def run(src: Path, root: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", RUN, str(src), str(root)], cwd=REPO)


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "finished" and "_tmp" not in p.parts
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    "stage", [pytest.param("ingest", marks=pytest.mark.soak), pytest.param("split", marks=pytest.mark.soak), "pair"]
)
def test_killed_run_resumes_to_identical_bytes(tmp_path, stage):
    src = tmp_path / "corpus.jsonl"
    make_corpus(src)
    clean = tmp_path / "clean"
    assert run(src, clean).wait(timeout=300) == 0

    crashed = tmp_path / "crashed"
    proc = run(src, crashed)
    marker = crashed / stage / "_done" / "00003"
    deadline = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    proc.kill()
    proc.wait()
    done = list((crashed / stage / "_done").iterdir())
    total = len(list((clean / stage / "_done").iterdir()))
    assert not (crashed / "finished").exists(), "the run finished before it could be killed"
    assert 0 < len(done) < total, f"killed with {len(done)}/{total} shards of {stage} done"

    assert run(src, crashed).wait(timeout=300) == 0
    assert snapshot(crashed) == snapshot(clean)
