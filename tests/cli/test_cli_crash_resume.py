"""A real `gur build-pairs --workers 2`, SIGKILLed with its whole process group in the middle of the pair stage,
then rerun: the result is byte for byte an uninterrupted run's, and every stage's manifest is complete."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from samples.pair_corpus import part_hashes, write_corpus  # noqa: E402
from tests.helpers import REPO  # noqa: E402
from tests.helpers.gur_subprocess import SLOW_PAIR_SHARDS, gur_env, tail

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.slow, pytest.mark.soak]

# 800 documents, 100 per shard: 8 shards in every map stage, about 4,000 pairs (several training shards).
N_DOCS = 800
OPTIONS = {"docs_per_shard": 100, "rows_per_shard": 400}


def test_gur_build_pairs_killed_mid_stage_resumes_to_the_same_bytes(tmp_path, prefect_api_url):
    from flows.build_pairs import build_pairs
    from storage.manifest import inventory, read_manifest

    corpus = write_corpus(tmp_path / "corpus.jsonl", n_docs=N_DOCS)
    clean_root, root = tmp_path / "clean", tmp_path / "crashed"
    clean = build_pairs(input_path=str(corpus), root=str(clean_root), workers=2, **OPTIONS)
    n_shards = len(part_hashes(clean_root, clean)["pair"])
    assert n_shards == 8

    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SLOW_PAIR_SHARDS, encoding="utf-8")
    cmd = [sys.executable, "-m", "gur_cli", "--root", str(root), "build-pairs", str(corpus), "--workers", "2"]
    cmd += [f"--{k.replace('_', '-')}={v}" for k, v in OPTIONS.items()]
    log = tmp_path / "killed.log"
    pair_dir = root / clean["pairs"]["path"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=REPO, env=gur_env(hooks), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 300
        while not (pair_dir / "_done").is_dir() or not any((pair_dir / "_done").iterdir()):
            assert proc.poll() is None, f"gur ended (rc {proc.returncode}) before a pair shard was done:\n{tail(log)}"
            assert time.monotonic() < deadline, f"no pair shard within 300 s:\n{tail(log)}"
            time.sleep(0.005)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # gur, its Prefect server and the pool workers
        proc.wait()

    done = sorted(m.name for m in (pair_dir / "_done").iterdir())
    assert not (pair_dir / "_manifest.json").exists(), "the pair stage finished before the kill"
    assert 0 < len(done) < n_shards, f"killed with {len(done)}/{n_shards} pair shards done"
    assert not (root / "shuffle").exists()
    finished = {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in pair_dir.glob("part-*.parquet")}
    assert len(finished) >= len(done)
    before = {s: (root / clean[s]["path"] / "_manifest.json").read_text() for s in ("documents", "sentences")}

    # the rerun on the run's test server: the killed run's own server (killed with it) is this test's subject
    again = subprocess.run(
        cmd, cwd=REPO, env=gur_env(api=prefect_api_url), capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]

    assert part_hashes(root, clean) == part_hashes(clean_root, clean)
    for name, ref in clean.items():
        folder = root / ref["path"]
        manifest, reference = read_manifest(folder), read_manifest(clean_root / ref["path"])
        assert manifest is not None, f"{name}: no manifest after the rerun"
        assert manifest["files"] == inventory(folder, ("_work",)), f"{name}: files on disk differ from the manifest"
        assert manifest["files"] == reference["files"], name  # every file and its SHA-256, as the clean run's
        assert (manifest["rows"], manifest["drops"]) == (reference["rows"], reference["drops"]), name
        assert sorted(p.name for p in (root / ref["stage"]).iterdir()) == [ref["fingerprint"]], name
    # Complete stages were reused as they were, and the shards done before the kill were not written again.
    assert before == {s: (root / clean[s]["path"] / "_manifest.json").read_text() for s in before}
    for index in done:
        part = pair_dir / f"part-{index}.parquet"
        assert (part.stat().st_mtime_ns, part.stat().st_ino) == finished[part], part.name
    assert json.loads((pair_dir / "_manifest.json").read_text())["rows"]["documents"] == N_DOCS
