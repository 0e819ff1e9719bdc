"""The night's plan: what tonight's work is, in steps and documents, and what of it fits the budget.

    if plans(night):
        rates = probed_rates(night, measured_rates(base, method))                  # a first night: probed now
        plan, ratio = night_plan(night, inputs, units_on_disk(base, gate_units), rates)   # printed before training
    print(budget_line(plan, actual))                                                # after the decision

A documents or TFCSG night on a held-out split is planned (tasks/nightly/budget.py does the arithmetic); a GUR
night has its own minutes of training (GUR_NIGHT) and a named suite's training side is not counted. A later
night whose full epoch does not fit trains on what is new plus a replay sample (`[train] replay`, "auto":
budget.replay_ratio), its length counted here on the night's input against the champion's. The same night
run again after a stop keeps its plan (tasks/nightly/kept_plan.py), so its training resumes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from models.training.presets import question_config, resolve_preset
from storage.layout import record_path
from storage.stage_output import ref_dir
from tasks.evaluate.suite import SIMILARITY_KINDS
from tasks.evaluate.task import unit_done
from tasks.nightly.budget import Plan, Rates, Work, full_steps, plan_night, replay_ratio, replay_rows
from tasks.nightly.kept_plan import keep_plan, kept_plan, night_key, steps_done
from tasks.nightly.night import Night
from tasks.nightly.recipe import documents_gur_share
from tasks.nightly.replay import champion_input
from tasks.nightly.teacher import teacher_name
from tasks.nightly.what_is_new import count_new

Inputs = dict[str, dict[str, str]]  # the night's training inputs by role: data, split, pairs (stage refs)


def plans(night: Night) -> bool:
    """Whether the night is planned: a documents or TFCSG night on a held-out split."""
    return night.method in ("documents", "tfcsg") and night.suite.train_records > 0


def units_on_disk(base: Path, calls: list[dict[str, Any]]) -> tuple[float, float]:
    """The shares of the gate's units (`calls`: the evaluate flow's, for the model in use) already on disk,
    (the suite's, the guard's): the gate reuses them (the model in use's guard on every later night, its suite
    where the held-out side did not change), so the plan does not count them."""
    guards = [c for c in calls if c["dataset"].kind in SIMILARITY_KINDS]  # the gate's guards; the rest: its suite
    rest = [c for c in calls if c["dataset"].kind not in SIMILARITY_KINDS]

    def share(units: list[dict[str, Any]]) -> float:
        return sum(unit_done(root=str(base), **c) for c in units) / len(units) if units else 0.0

    return share(rest), share(guards)


def night_plan(night: Night, inputs: Inputs, reused: tuple[float, float], rates: Rates) -> tuple[Plan, float]:
    """(the budget's plan, the replay ratio the candidate trains with), the plan printed. `reused`: the model in
    use's gate units on disk (units_on_disk); `rates`: this root's (budget.measured_rates), a probe's where it has
    none (tasks/nightly/probe.py)."""
    length = run_length(night)
    work = tonight(night, length(night.suite.train_records), reused)
    minutes = night.cfg.budget.minutes
    key = night_key(night.method, inputs, record_path(night.base, night.start), night.settings, minutes)
    kept = kept_plan(night.base, key)
    if kept:  # the same night run again after a stop: its steps, replay and ratio, so its training resumes
        done = steps_done(night.base, kept["planned_at"], kept["steps"], night.start)
        work = replace(work, steps=kept["full_steps"], replay=kept["replay"])
        plan = plan_night(minutes * 60, night.elapsed(), work, rates, {**kept, "steps_done": done})
        ratio = kept["ratio"]
    else:
        plan, ratio = fresh_plan(night, inputs, work, rates, length)
        keep_plan(night.base, key, plan, ratio, time.time())
    for line in plan.lines():
        print(line)
    return plan, ratio


def run_length(night: Night) -> Callable[[int], int]:
    """A training run's steps on so many records: `[train] steps`, else the recipe's epochs at its batch size
    (GUR's batches on top for documents)."""
    t, preset = night.train, run_preset(night)
    share = documents_gur_share(t) if t.method == "documents" else 0.0
    return lambda records: t.steps or full_steps(records, preset["batch_size"], preset["epochs"], share)


def run_preset(night: Night) -> dict[str, Any]:
    """The candidate's training settings: the method's preset with `[train] options` over it."""
    t = night.train
    return question_config(t.method, resolve_preset(t.preset, gpu=False), dict(t.options))


def tonight(night: Night, steps: int, reused: tuple[float, float]) -> Work:
    """What tonight would do without a budget."""
    e, suite = night.cfg.evaluate, night.suite
    return Work(
        steps=steps,
        suite_docs=suite.scored,
        corpus_docs=suite.records,
        guard=bool(e.stsb or e.lee),
        reused_suite=reused[0],
        reused_guard=reused[1],
        teacher=teacher_name(t) if (t := night.train.options.get("teacher")) else "",
    )


def fresh_plan(
    night: Night, inputs: Inputs, work: Work, rates: Rates, length: Callable[[int], int]
) -> tuple[Plan, float]:
    """A night's first plan: every step if they fit; where they do not and the champion trained on an earlier
    input, the replay ratio, and the plan again on the replay run's length (what is new plus older rows)."""
    budget_s, method = night.cfg.budget.minutes * 60, night.method
    plan = plan_night(budget_s, night.elapsed(), work, rates)
    earlier = champion_input(night.champion, night.base, method)
    ratio = replay_ratio(night.train.replay, bool(earlier), not plan.capped)
    if not (ratio and earlier and not night.train.steps):
        return plan, ratio
    stage = "keywords" if method == "tfcsg" else "split"
    now = ref_dir(night.base, inputs["data"] if method == "tfcsg" else inputs["split"])
    new, rows = count_new(method, str(now), str(ref_dir(night.base, {"stage": stage, "fingerprint": earlier})))
    if not new:  # where nothing is new every row is an older one: the ratio does not apply
        return plan, ratio
    held = float(run_preset(night).get("heldout_fraction") or 0)  # the trainer's own held-out share of the input
    scaled = replay_rows(new, rows, ratio) * (1 - held)
    replay = {"ratio": ratio, "new_rows": new, "rows": rows, "epoch_steps": work.steps}
    work = replace(work, steps=min(work.steps, length(math.ceil(scaled))), replay=replay)
    return plan_night(budget_s, night.elapsed(), work, rates), ratio


def budget_line(plan: Plan, actual: dict[str, float]) -> str:
    """The decision's time against the plan's."""
    took, budget = actual["decision_s"], plan.budget_s
    off = (took - plan.decision_s) / plan.decision_s if plan.decision_s else 0.0
    return (
        f"budget: decided after {took / 60:.1f} min of {budget / 60:.0f} (plan {plan.decision_s / 60:.1f} min, "
        f"{off:+.0%}); training {actual['train_s']:.0f} s (plan {plan.train_s:.0f}), gate {actual['gate_s']:.0f} s "
        f"(plan {plan.gate_s:.0f})"
    )
