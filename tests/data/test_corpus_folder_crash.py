"""A night's per-file work SIGKILLed with `gur`'s whole process group, then rerun: the night's outputs are
byte for byte those of an uninterrupted night, and the files read before the kill are not read again. `gur`
runs on the tests' Prefect server (a killed command with its own server: tests/cli/test_cli_crash_resume.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

from samples.pair_corpus import part_hashes  # noqa: E402
from tests.helpers import REPO  # noqa: E402
from tests.helpers.corpus_folder import docs, jsonl_bytes  # noqa: E402
from tests.helpers.gur_subprocess import gur_env, tail
from tests.helpers.slow_down import slow_down

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.slow]

# Each file of a folder takes 1 s longer to ingest, so the kill lands between two files on any machine.
SLOW_FILES = slow_down("tasks.ingest.folder", "ingest_file", 1.0)
OPTIONS = {"docs_per_shard": 20, "rows_per_shard": 300, "source_name": "corpus"}


def test_a_night_killed_between_files_resumes_to_the_same_bytes(tmp_path, prefect_api_url):
    from flows.build_pairs import build_pairs

    folder = tmp_path / "corpus"
    folder.mkdir()
    for n in range(2):
        (folder / f"day{n}.jsonl").write_bytes(jsonl_bytes(docs(30, n)))
    clean_root, root = tmp_path / "clean", tmp_path / "crashed"
    for r in (clean_root, root):  # the first night, on both roots
        build_pairs(input_path=str(folder), root=str(r), workers=1, **OPTIONS)
    for n in range(2, 6):  # the second night brings four files
        (folder / f"day{n}.jsonl").write_bytes(jsonl_bytes(docs(30, n)))
    clean = build_pairs(input_path=str(folder), root=str(clean_root), workers=1, **OPTIONS)

    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SLOW_FILES, encoding="utf-8")
    cmd = [sys.executable, "-m", "gur_cli", "--root", str(root), "build-pairs", str(folder), "--workers", "1"]
    cmd += [f"--{k.replace('_', '-')}={v}" for k, v in OPTIONS.items()]
    units = root / "ingest-file"
    before = {p.name for p in units.iterdir()}
    log = tmp_path / "killed.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            env=gur_env(hooks, api=prefect_api_url),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 300
        while not [p for p in units.glob("*/_manifest.json") if p.parent.name not in before]:
            assert proc.poll() is None, f"gur ended (rc {proc.returncode}) before a file was ingested:\n{tail(log)}"
            assert time.monotonic() < deadline, f"no file ingested within 300 s:\n{tail(log)}"
            time.sleep(0.01)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    made = {p.parent.name: p.stat().st_mtime_ns for p in units.glob("*/_manifest.json") if p.parent.name not in before}
    assert 1 <= len(made) < 4, f"killed with {len(made)}/4 new files ingested"
    assert not (root / clean["documents"]["path"] / "_manifest.json").exists(), "the night finished before the kill"

    again = subprocess.run(
        cmd, cwd=REPO, env=gur_env(api=prefect_api_url), capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    assert part_hashes(root, clean) == part_hashes(clean_root, clean)
    # The files ingested before the kill were reused as they were: only the others were read.
    assert {name: (units / name / "_manifest.json").stat().st_mtime_ns for name in made} == made
    from storage.manifest import read_manifest

    assert read_manifest(root / clean["documents"]["path"])["file_work"]["read"] == 4 - len(made)
