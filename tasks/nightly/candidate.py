"""The candidate's training run: the train flow's parameters for tonight, and what the result is judged against.

    params = train_parameters(night, inputs, plan, ratio)   # train_flow(**params): from the model in use
    reference = judged_against(night)                        # the champion's export, else the start model

The parameters are a pure function of the night, so a night run again after a stop asks for the same run (its
fingerprint) and resumes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tasks.nightly.budget import Plan
from tasks.nightly.night import Night
from tasks.nightly.recipe import GUR_NIGHT
from tasks.nightly.replay import replay_options


@dataclass(frozen=True)
class Trained:
    """The candidate's training run (its stage ref), its export, and the model it is judged against."""

    ref: dict[str, str]
    candidate: str
    reference: str


def train_parameters(night: Night, inputs: dict[str, dict[str, str]], plan: Plan | None, ratio: float) -> dict:
    """The train flow's parameters: warm-started from the model in use (the champion, else the configured init,
    else MiniLM); `method = "gur"` with GUR_NIGHT's settings and time budget; TFCSG on the keywords output;
    documents on the split's sentences and the night's own shuffle output (`inputs`). A plan that cut the steps
    (`capped`) trains the rows new since the champion's data first (replay_options); `ratio`: the plan's replay
    ratio, else `[train] replay` as a number."""
    t, data = night.train, inputs["data"]
    capped = bool(plan and plan.capped)
    replay = replay_options(t.method, ratio, night.champion, night.base, capped)
    kwargs: dict[str, Any] = {"keywords": data["fingerprint"]} if t.method == "tfcsg" else {"shards": data}
    if t.method == "documents":
        kwargs = {"shards": inputs["split"], "pairs": inputs["pairs"]}
    return {
        "method": t.method,
        "preset": t.preset if t.preset != "auto" or t.method != "gur" else None,
        "steps": (plan.steps if capped else 0) or t.steps or None,
        "init_from": night.start,
        "options": {**(GUR_NIGHT if t.method == "gur" else {}), **t.options, **replay},
        "root": str(night.base),
        **kwargs,
    }


def judged_against(night: Night) -> str:
    """The model the candidate is judged against: the champion, else the model it started from."""
    return night.champion["export"] if night.champion else night.start
