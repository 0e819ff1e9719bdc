"""The night's plan against its budget: how many training steps fit, what the gate costs, when search follows.

    rates = measured_rates(root, method)          # seconds per training step, per suite document, per embedding
    plan = plan_night(budget_s, elapsed_s, work, rates)
    print("\n".join(plan.lines()))                # before training: what fits, what is cut and why
    row["plan"], row["actual"] = plan.record(), {...}   # the decision row

The budget (`[budget] minutes`) runs from the night's start to its decision. The data stages run first
(they cost what is new: seconds on a grown corpus); then the plan gives the gate its share (both models
encode the suite, capped by `[evaluate] suite_documents`, and the guard; what the model in use has scored on
disk already is reused, not counted: its guard on a later night), keeps a reserve for what the
estimate misses, and gives training the rest: the recipe's full length when it fits, else the steps that
fit (the first batches of the epoch's seeded order; with clustered batches, the pages of a random subset of
the clusters; at least MIN_STEPS).
A later night (the champion trained on an earlier output of this root) whose full epoch does not fit trains on
what is new or changed since the champion's data plus a seeded replay sample of the rest (`[train] replay`,
"auto": AUTO_REPLAY older rows per new one), so a night costs what is new, not the whole corpus.
A night stopped and run again keeps its plan (tasks/nightly/kept_plan.py: `plan_night(..., kept)`): its steps,
whatever time is left now, and only those its checkpoints have not done counted.
The embedding for search runs after the decision (never what the decision waits for): the plan says how
long it will take, so the night says when search serves the new champion.

Rates are this root's own where it has them (the newest training run of the method: seconds per step in its
step loop and its clustering of the documents those steps show, and the rest of its time as a start cost, which
does not grow with the steps; the two newest
label-free evaluation units, one model's title and ICT, a trained model's where the root has them: seconds per
suite document per model (each task's own time, not one's twice), and the guard's (a trained model's too); the
newest embed output of EMBED_SAMPLE documents or more: seconds per embedded document), else DEFAULT_RATES, the
2-core development VM's (measured on the large rung's nights: docs/results/).
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from storage.layout import MANIFEST

MIN_STEPS = 10  # fewer and a candidate is noise: the plan says it overruns instead
RESERVE = 0.10  # of what is left after the data stages: what the estimates may miss
DEFAULT_MINUTES = 180.0
# an embed output that embedded fewer documents is mostly its start (the model, the reused shards read): a night
# that embedded a few hundred new ones would predict a whole re-embedding at several times its cost
EMBED_SAMPLE = 1000
# older rows per new one: a TFCSG candidate on what is new plus as much again matched one on the full corpus
# (docs/results/2026-11-25-nightly-replay-candidate.md)
AUTO_REPLAY = 1.0


@dataclass(frozen=True)
class Rates:
    """Seconds per unit of work on this machine, and where each figure came from."""

    # the documents recipe, batch 32 x 256-token passages, on the development VM's 2 cores (benchmarks/
    # train_step_memory.py: docs/results/2026-12-06-train-step-memory-attention-dropout.md)
    train_step_s: float = 4.7
    train_start_s: float = 60.0  # a run's time outside its steps (loading, clustering, the export); 0: in the rate
    suite_doc_s: float = 0.075  # one model: the label-free tasks' share of one held-out document (float32)
    guard_s: float = 35.0  # one model: the STS guard (STS-B train, 5,749 pairs)
    embed_doc_s: float = 0.02  # one document embedded for search (bfloat16 where native)
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    def source(self, name: str) -> str:
        return self.sources.get(name, "default (2-core VM)")


DEFAULT_RATES = Rates()


@dataclass(frozen=True)
class Work:
    """What tonight would do without a budget."""

    steps: int  # the recipe's full length on tonight's training side
    suite_docs: int  # held-out documents the gate scores (after the cap)
    corpus_docs: int  # documents search embeds after a promotion
    guard: bool = True  # the gate also scores an STS guard (STS-B or Lee-50)
    replay: dict[str, Any] = field(default_factory=dict)  # a replay run: ratio, new_rows, rows, epoch_steps
    # the shares of the model in use's suite and guard units already on disk: the gate reuses them
    reused_suite: float = 0.0
    reused_guard: float = 0.0
    teacher: str = ""  # the teacher the candidate distils (tasks/nightly/teacher.py): its name, "" for none

    def gate_s(self, rates: Rates) -> float:
        """The candidate's suite and guard, and what the model in use has not scored yet."""
        suite = (2 - self.reused_suite) * self.suite_docs * rates.suite_doc_s
        return suite + ((2 - self.reused_guard) * rates.guard_s if self.guard else 0.0)

    def reused(self) -> str:
        """The plan's note on the model in use's units the gate reuses ("" when none)."""
        counted = (("suite", self.reused_suite), ("guard", self.reused_guard if self.guard else 0.0))
        names = [name if share == 1 else f"{name} ({share:.0%} of its units)" for name, share in counted if share]
        return f"; the model in use's {' and '.join(names)} on disk, reused" if names else ""


@dataclass(frozen=True)
class Plan:
    budget_s: float
    elapsed_s: float  # spent before the plan (data stages, the suite)
    full_steps: int
    steps: int  # what training runs (full_steps, or fewer to fit)
    train_s: float
    gate_s: float
    embed_s: float  # after the decision
    fits: bool  # the estimate ends within the budget
    rates: Rates
    replay: dict[str, Any] = field(default_factory=dict)  # Work.replay
    reused: str = ""  # Work.reused(): the model in use's gate units already on disk
    kept: dict[str, Any] = field(default_factory=dict)  # a stopped night's plan run again: planned_at, steps_done
    teacher: str = ""  # Work.teacher

    @property
    def capped(self) -> bool:
        return self.steps < self.full_steps

    @property
    def decision_s(self) -> float:
        return self.elapsed_s + self.train_s + self.gate_s

    def lines(self) -> list[str]:
        """What the night prints before training."""
        r = self.rates
        left = self.budget_s - self.elapsed_s
        out = [
            f"plan: budget {_duration(self.budget_s)} to the decision; {_duration(self.elapsed_s)} spent on the data "
            f"stages, {_duration(left)} left"
        ]
        steps = f"{self.steps} steps" if not self.capped else f"{self.steps} of {self.full_steps} steps"
        start = f" + {_duration(r.train_start_s)} to start" if r.train_start_s else ""
        out.append(
            f"plan: training {steps} x {r.train_step_s:.1f} s{start} ({r.source('train_step_s')}) "
            f"= {_duration(self.train_s)}"
        )
        if self.teacher:
            out.append(
                f"plan: teacher {self.teacher} scores every training batch's queries against its passages (in the "
                f"step's {r.train_step_s:.1f} s); it is not adapted to the corpus (the step would take it too)"
            )
        if self.kept:
            k = self.kept
            out.append(
                f"plan: the night planned at {_clock(k['planned_at'])} on these inputs, run again: its {self.steps} "
                f"steps kept (a new count would start its training over), {k['steps_done']} of them done"
            )
        if self.replay:
            p = self.replay
            out.append(
                f"plan: a later night: {p['new_rows']} of {p['rows']} training rows new or changed since the "
                f"champion's data, then {p['ratio']:g} older row(s) per new one ([train] replay): "
                f"{self.full_steps} steps (the full epoch: {p['epoch_steps']})"
            )
        if self.capped:
            out.append(
                f"plan: the full run ({self.full_steps} steps, {_duration(self.full_steps * r.train_step_s)}) "
                f"does not fit: {self.steps} steps train on what is new or changed since the champion's data first, "
                "then a seeded sample of the rest (the first night: a seeded sample of the training side)"
            )
        out.append(
            f"plan: the gate {_duration(self.gate_s)} (two models x the suite and the guard{self.reused}; "
            f"{r.suite_doc_s:.3f} s a suite document, {r.source('suite_doc_s')})"
        )
        verdict = "within the budget" if self.fits else "OVER the budget even at the fewest steps"
        out.append(f"plan: decision after about {_duration(self.decision_s)}, {verdict}")
        out.append(
            f"plan: then the embedding for search, about {_duration(self.embed_s)} after a promotion "
            f"({r.embed_doc_s:.3f} s a document, {r.source('embed_doc_s')}); search serves the model in use meanwhile"
        )
        return out

    def record(self) -> str:
        """The decision row's `plan` column (JSON)."""
        fields = {k: v for k, v in asdict(self).items() if k != "rates"}
        rates = {k: v for k, v in asdict(self.rates).items() if k != "sources"}
        return json.dumps({**fields, "rates": rates, "rate_sources": self.rates.sources}, sort_keys=True)


def plan_night(
    budget_s: float, elapsed_s: float, work: Work, rates: Rates = DEFAULT_RATES, kept: dict[str, Any] | None = None
) -> Plan:
    """The steps that fit in what the budget leaves after the data stages, the gate and a reserve; a stopped
    night's (`kept`: tasks/nightly/kept_plan.py, with `steps_done`) where it is run again, only the steps its
    checkpoints have not done counted."""
    gate_s = work.gate_s(rates)
    room = (budget_s - elapsed_s) * (1 - RESERVE) - gate_s - rates.train_start_s
    fit = max(0, math.floor(room / rates.train_step_s)) if rates.train_step_s > 0 else work.steps
    steps = kept["steps"] if kept else min(work.steps, max(fit, MIN_STEPS))
    done = min(steps, kept.get("steps_done", 0)) if kept else 0
    train_s = (rates.train_start_s if done < steps else 0.0) + (steps - done) * rates.train_step_s
    embed_s = work.corpus_docs * rates.embed_doc_s
    fits = elapsed_s + train_s + gate_s <= budget_s
    note = {"planned_at": kept["planned_at"], "steps_done": done} if kept else {}
    shape = (work.steps, steps, train_s, gate_s, embed_s, fits)
    return Plan(budget_s, elapsed_s, *shape, rates, work.replay, work.reused(), note, work.teacher)


def replay_ratio(setting: float | str, later: bool, epoch_fits: bool) -> float:
    """`[train] replay` as a ratio: "auto" is AUTO_REPLAY on a later night whose full epoch does not fit the
    budget, else 0 (every row: a first night, or a corpus small enough to retrain whole)."""
    if setting != "auto":
        return float(setting)
    return AUTO_REPLAY if later and not epoch_fits else 0.0


def replay_rows(new_rows: int, rows: int, ratio: float) -> int:
    """The rows a replay run trains on (models/training/replay.py's new_first without a cap): the new ones and
    `ratio` times as many older ones; every row where nothing is new or the ratio is 0."""
    if not new_rows or ratio == 0:
        return rows
    return new_rows + min(rows - new_rows, round(ratio * new_rows))


def full_steps(records: int, batch_size: int, epochs: float, gur_share: float = 0.0) -> int:
    """One run's length: `epochs` passes of one pair a record at `batch_size`, GUR's batches on top."""
    structure = math.ceil(records * epochs / max(batch_size, 1))
    return max(1, math.ceil(structure / (1 - gur_share)) if 0 < gur_share < 1 else structure)


def measured_rates(root: Path, method: str, teacher: str = "") -> Rates:
    """DEFAULT_RATES with each figure this root has measured in its newest outputs replaced by it; the training
    step's from a run of the method with the same `teacher` (its folder, "" for none: a teacher's scoring is
    most of a step)."""
    found: dict[str, float] = {}
    sources: dict[str, str] = {}

    def same_run(m: dict[str, Any]) -> bool:
        config = m.get("config") or {}
        return config.get("method") == method and config.get("teacher", "") == teacher and _steps(m) > 0

    train = _newest(root / "train", same_run)
    if train:
        summary = train.get("summary") or {}
        # its steps' share, where recorded: the step loop, and the clustering of the documents those steps show
        stepping = float(summary.get("trained_s") or 0) + float(summary.get("clusters_s") or 0)
        found["train_step_s"] = (stepping or _took(train)) / _steps(train)
        found["train_start_s"] = max(0.0, _took(train) - stepping) if stepping else 0.0
        sources["train_step_s"] = f"this root: train/{train['fingerprint']}"
    # one model's title and ICT units, and its guard: a trained model's where there are (the gate scores the
    # candidate, and on a later night a trained champion: their units check overlap with the training input, the
    # start's do not); the folder read once
    evaluated = _newest_n(root / "eval-unit", lambda m: True, None)
    units = _prefer_trained([u for u in evaluated if _suite_docs(u)])[:2]
    if units:
        found["suite_doc_s"] = sum(_took(u) / _suite_docs(u) for u in units) * 2 / len(units)
        sources["suite_doc_s"] = "this root: " + ", ".join(f"eval-unit/{u['fingerprint']}" for u in units)
    guards = _prefer_trained([u for u in evaluated if not u.get("detail") and u.get("status") == "ok"])
    guard = guards[0] if guards else None
    if guard:
        found["guard_s"] = _took(guard)
        sources["guard_s"] = f"this root: eval-unit/{guard['fingerprint']}"
    embed = _newest(root / "embed", lambda m: (m.get("embedded_now") or 0) >= EMBED_SAMPLE)
    if embed:
        found["embed_doc_s"] = _took(embed) / embed["embedded_now"]
        sources["embed_doc_s"] = f"this root: embed/{embed['fingerprint']}"
    return Rates(**{**asdict(DEFAULT_RATES), **found, "sources": sources})


def _newest(folder: Path, keep) -> dict[str, Any] | None:
    found = _newest_n(folder, keep, 1)
    return found[0] if found else None


def _prefer_trained(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A trained model's units where there are any (in their order), else all of them."""
    return [m for m in manifests if _trained(m)] or manifests


def _newest_n(folder: Path, keep, n: int | None) -> list[dict[str, Any]]:
    """The `n` newest finished manifests under `folder` that `keep` accepts (None: all), newest first."""
    found = []
    for path in folder.glob(f"*/{MANIFEST}") if folder.is_dir() else []:
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if _took(manifest) > 0 and keep(manifest):
            found.append(manifest)
    return sorted(found, key=lambda m: m["finished_at"], reverse=True)[:n]


def _took(manifest: dict[str, Any]) -> float:
    return float(manifest.get("finished_at") or 0) - float(manifest.get("started_at") or 0)


def _trained(manifest: dict[str, Any]) -> bool:
    """An evaluation unit of a model trained on this root (its overlap check names the training input)."""
    return bool((manifest.get("overlap") or {}).get("training_input"))


def _steps(manifest: dict[str, Any]) -> int:
    return int((manifest.get("rows") or {}).get("steps") or 0)


def _suite_docs(manifest: dict[str, Any]) -> int:
    """A retrieval unit's documents (its detail: "556 queries, 596 documents"), 0 for other units."""
    match = re.search(r"(\d+) documents", str(manifest.get("detail") or ""))
    return int(match.group(1)) if match and manifest.get("status") == "ok" else 0


def _clock(epoch: float) -> str:
    """A moment of tonight, as the logs print it (UTC)."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
