"""A full disk is named as such: which disk, how full, what to do; and what a candidate needs is estimated from
its start's weights (the night makes room first when the disk holds less)."""

from __future__ import annotations

import argparse
import errno
import shutil

from gur_cli import disk_full_hint
from storage.disk_space import SPACE_FACTOR, free_bytes, out_of_space, training_space, weights_bytes


def test_an_error_naming_enospc_is_blamed_on_the_disk_and_says_what_to_do(tmp_path):
    note = out_of_space(tmp_path, "RuntimeError: ... [Errno 28] No space left on device: '/x/part-00000.parquet'")
    free = shutil.disk_usage(tmp_path).free
    assert note.startswith(f"no space left on the disk holding {tmp_path} ({free / 1e6:,.1f} MB free of ")
    assert "gur gc --apply" in note and "larger disk" in note
    assert out_of_space(tmp_path, "RuntimeError: CUDA error: device-side assert triggered") is None  # a roomy disk
    assert free_bytes(tmp_path / "not" / "made" / "yet") == free  # a root not made yet: its parent's disk


def test_gur_names_the_disk_for_an_enospc_anywhere_in_the_error_chain(tmp_path):
    args = argparse.Namespace(root=str(tmp_path / "data"))
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "data" / "x.parquet"))
        except OSError as low:
            raise RuntimeError("[Errno 28] Error writing bytes to file") from low
    except RuntimeError as exc:
        hint = disk_full_hint(exc, args)
    assert hint.startswith(f"; no space left on the disk holding {tmp_path / 'data'} (")
    assert hint.endswith("then rerun the same command: finished stages and the last checkpoint are kept")
    assert disk_full_hint(ValueError("bad --format"), args) == ""
    said = RuntimeError(f"training exited with 1: {out_of_space(tmp_path, 'No space left on device')}")
    assert disk_full_hint(said, args) == ""  # the message names the disk already


def test_a_candidate_needs_about_eight_times_its_starts_weights(tmp_path):
    model = tmp_path / "model"
    (model / "1_Pooling").mkdir(parents=True)
    (model / "model.safetensors").write_bytes(bytes(1000))
    (model / "1_Pooling" / "pytorch_model.bin").write_bytes(bytes(24))
    (model / "config.json").write_text("{}", encoding="utf-8")  # not weights
    assert weights_bytes(model) == 1024 and training_space(model) == SPACE_FACTOR * 1024
    assert training_space("") == 0 and training_space(tmp_path / "missing") == 0  # GUR from scratch: no start
