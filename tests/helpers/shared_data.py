"""Tests on the shared evaluation data (`storage.shared_data.shared_data()`: `$GUR_SHARED_DATA`, else the folder
beside the repository): skipped without it on a developer's machine, failed without it under CI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage.shared_data import ENV, shared_data


def in_ci() -> bool:
    """CI runs with CI=true (as GitHub Actions, GitLab and most others set it); "", "0", "false", "no" are not CI."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_shared(*paths: Path) -> None:
    """Skip the calling test when a file of the shared data is missing; under CI fail it instead, so CI
    never passes while silently running none of the evaluation tests."""
    missing = [str(p) for p in paths if not Path(p).exists()]
    if not missing:
        return
    message = f"shared evaluation data not found: {', '.join(missing)}"
    if in_ci():
        pytest.fail(f"{message} (CI is set: CI must provide {shared_data()} or set {ENV})", pytrace=False)
    pytest.skip(message)
