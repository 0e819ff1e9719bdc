"""What a candidate on a grown corpus trains on: the rows new since the champion's data, and how many older ones.

    options = replay_options(method, ratio, champion, base, capped)   # the train flow's replay options

With a replay `ratio` R (`[train] replay`, resolved by the plan) a TFCSG or documents candidate trains on the
rows new since the champion's input (TFCSG: its keywords output; documents: the split output its training
read) plus a seeded sample of the older ones, R times as many (models/training/replay.py); with a capped run
(the budget cut the steps) the new ones first, then older ones as far as the steps go. The first night, and a
champion from another kind of input, train on everything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from storage.manifest import read_manifest
from storage.stage_output import ref_dir
from tasks.nightly.config import TrainSection


def replay_options(
    method: str, ratio: float, champion: dict[str, Any] | None, base: Path, capped: bool = False
) -> dict[str, Any]:
    """The train flow's options for a replay or capped run (`{}`: every row, in the recipe's order)."""
    if not (ratio or capped) or method not in ("tfcsg", "documents"):
        return {}
    earlier = champion_input(champion, base, method)
    out = {"new_first": True} if capped else {}  # the rows the steps show, chosen before clustering reads them
    return {**out, "replay_since": earlier, "replay_ratio": float(ratio)} if earlier else out


def fixed_replay(train: TrainSection) -> float:
    """`[train] replay` where no plan resolves "auto" (a GUR night, a named suite): a number as given, else 0."""
    return 0.0 if train.replay == "auto" else float(train.replay)


def champion_input(champion: dict[str, Any] | None, base: Path, method: str) -> str:
    """The fingerprint of the input the champion trained on, of the kind `method` reads (TFCSG: its keywords
    output; documents: its training run's split output, while it is on disk); "" where there is none."""
    if not champion or champion.get("method", method) != method:
        return ""
    data = champion.get("data") or {}
    if method == "tfcsg":
        return data["fingerprint"] if data.get("stage") == "keywords" else ""
    manifest = read_manifest(ref_dir(base, champion["train"])) if champion.get("train") else None
    split = next((u for u in (manifest or {}).get("upstream", []) if u["stage"] == "split"), None)
    if split is None or not ref_dir(base, split).is_dir():
        return ""
    return split["fingerprint"]
