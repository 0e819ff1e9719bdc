"""The all-mpnet-base-v2 kit's pieces (benchmarks/gpu_kit.py): stored in order, one call each, they give back
the exact payload, whose SHA-256 the last call checks before it unpacks the site and the model."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from gpu_kit import write_pieces  # noqa: E402


def payload() -> bytes:
    """A tar shaped like the kit's: an xz site and random bytes in place of the weights (no model16 file, so the
    last call stops at the restore: the suite never starts here)."""
    site = io.BytesIO()
    with tarfile.open(fileobj=site, mode="w:xz") as tar:
        info = tarfile.TarInfo("marker.py")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"x=1"))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in (("site.tar.xz", site.getvalue()), ("data/noise", np.random.default_rng(0).bytes(5000))):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def call(repo: Path, k: int, store: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MKIT": str(store), "OUT": str(repo / "out")}
    bin_dir = repo / "bin"  # `python3` in the script: this interpreter (it has safetensors)
    bin_dir.mkdir(exist_ok=True)
    if not (bin_dir / "python3").exists():
        (bin_dir / "python3").symlink_to(sys.executable)
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    script = repo / ".devkit" / f"m{k}" / "run.sh"
    return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def kit(tmp_path):
    data = payload()
    n = write_pieces(data, tmp_path / "repo" / ".devkit", 4096)
    return tmp_path / "repo", data, n


def test_pieces_in_order_give_back_the_payload_and_the_last_checks_it(kit, tmp_path):
    repo, data, n = kit
    assert n == -(-len(data) // 4096) >= 3
    assert all((repo / ".devkit" / f"m{k}" / "piece").stat().st_size <= 4096 for k in range(1, n + 1))
    store = tmp_path / "store"
    early = call(repo, 2, store)  # a call out of order (or on a fresh machine) stores nothing
    assert early.returncode == 3 and "holds nothing, not 1" in early.stdout
    assert not (store / "payload.tar").exists()
    for k in range(1, n):
        done = call(repo, k, store)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"piece {k} of {n} stored" in done.stdout
    again = call(repo, 2, store)  # a piece twice is refused
    assert again.returncode == 3 and f"holds {n - 1} pieces of this kit, not 1" in again.stdout
    last = call(repo, n, store)
    assert (store / "payload.tar").read_bytes() == data
    assert "payload.tar: OK" in last.stdout  # the SHA-256 matched
    assert (store / "site" / "marker.py").read_text() == "x=1"  # the site unpacked
    assert last.returncode == 7, last.stdout + last.stderr  # the restore: no model16.safetensors in this payload
    rerun = call(repo, n, store)  # the last call again (a timeout, a failed suite): it checks and runs again
    assert "already" in rerun.stdout and "payload.tar: OK" in rerun.stdout and rerun.returncode == 7
    assert (store / "payload.tar").read_bytes() == data  # nothing appended twice


def test_the_first_call_starts_over_whatever_was_left(kit, tmp_path):
    """A failed window, or another kit's pieces on a warm machine: m1 empties the store, the rest follow."""
    repo, data, n = kit
    store = tmp_path / "store"
    store.mkdir()
    (store / "pieces").write_text("0123abcd 2\n")  # another kit's counter
    (store / "payload.tar").write_bytes(b"left over")
    refused = call(repo, 2, store)
    assert refused.returncode == 3 and "another kit's pieces" in refused.stdout
    for k in range(1, n):
        assert call(repo, k, store).returncode == 0
    assert call(repo, 1, store).returncode == 0  # m1 again: starts over
    assert (store / "payload.tar").stat().st_size == (repo / ".devkit" / "m1" / "piece").stat().st_size
    for k in range(2, n):
        assert call(repo, k, store).returncode == 0
    assert call(repo, n, store).returncode == 7 and (store / "payload.tar").read_bytes() == data


def test_a_damaged_piece_stops_the_last_call_before_anything_runs(kit, tmp_path):
    repo, data, n = kit
    piece = repo / ".devkit" / "m2" / "piece"
    damaged = bytearray(piece.read_bytes())
    damaged[10] ^= 1
    piece.write_bytes(bytes(damaged))
    store = tmp_path / "store"
    for k in range(1, n):
        assert call(repo, k, store).returncode == 0
    last = call(repo, n, store)
    assert last.returncode == 5 and "FAILED" in last.stdout + last.stderr
    assert not (store / "x").exists()
