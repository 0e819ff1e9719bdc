"""Where the shared evaluation data is: `$GUR_SHARED_DATA`, else `../shared/data` beside the repository.

The public evaluation sets (StackOverflow titles, STS-B) are not in the repository: CI and development
machines keep them in `../shared/data`, a user downloads them. A default that names one of them goes through
`shared_data` (never the working directory), and a default file this machine lacks is one line:

    path = shared_data("stsb", "stsb-en-dev.csv")  # $GUR_SHARED_DATA/stsb/..., else <repo>/../shared/data/stsb/...
    if not path.is_file():
        print(missing_default("--stsb", path, "skipped: to add it, pass --stsb FILE"))
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "GUR_SHARED_DATA"
REPO = Path(__file__).resolve().parents[1]


def shared_data(*parts: str) -> Path:
    """`$GUR_SHARED_DATA/<parts>` when the variable is set (not empty), else `<repository>/../shared/data/<parts>`."""
    folder = os.environ.get(ENV)
    return Path(folder).joinpath(*parts) if folder else REPO.parent.joinpath("shared", "data", *parts)


def missing_default(key: str, path: Path, fix: str) -> str:
    """One line for a default file that is not on this machine: the option or config key that defaulted to
    `path`, then `fix` (what to pass instead, or that the part was skipped and how to add it)."""
    return f"{key}: the default {path} is not on this machine; {fix}, or set {ENV} to a copy of the shared data folder"
