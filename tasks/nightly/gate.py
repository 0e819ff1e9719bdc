"""The nightly gate, a pure function: promote iff the suite can be scored fairly (the queries whose texts the
candidate trained on are left out of the paired test: tasks/nightly/fair_queries.py), the primary metric's
paired gain is larger than its noise (its bootstrap interval lies above
the margin and the permutation p-value is below 1 - confidence) and no guard metric drops by more
than its allowance; a missing metric refuses. An export `gur rollback` took back is never promoted by a night.
`judge` is what a night calls: the evidence from its evaluation units, the paired test, the decision.

    result = evaluate(**gate_evaluation(night, [candidate, reference]))     # the evaluate flow's parameters
    judged = judged_night(night, result, candidate, reference)             # metrics, evidence, test, decision
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from storage.champion import rolled_back
from tasks.nightly.config import GateSection
from tasks.nightly.report import metrics_by_model, primary_evidence
from tasks.nightly.significance import PairedTest, paired_test

if TYPE_CHECKING:
    from tasks.nightly.night import Night


@dataclass(frozen=True)
class Decision:
    promote: bool
    reason: str


def gate(
    candidate: dict[str, float],
    champion: dict[str, float],
    primary: str,
    margin: float,
    guards: dict[str, float],
    test: PairedTest | None,
    overlap: int | None = 0,
    refusal: str | None = None,
    dropped: int = 0,
) -> Decision:
    """Promote iff the suite can be scored fairly (`refusal` None: fair_queries.Shared.refusal), the paired
    `test` of the primary metric (on the queries left after `dropped` ones whose texts the candidate trained on)
    shows a gain above its noise (interval low end > margin, p-value < 1 - confidence) and no guard drops by
    more than allowed. An unknown overlap (`overlap` None: the candidate's training input is unknown) or a
    missing metric or test refuses."""
    if overlap is None:
        return Decision(False, "the suite shares an unknown number of texts with the candidate's training input")
    if refusal:
        return Decision(False, refusal)
    for name in (primary, *guards):
        missing = [who for who, values in (("candidate", candidate), ("champion", champion)) if name not in values]
        if missing:
            return Decision(False, f"{name} was not measured for the {' and '.join(missing)}")
    if test is None:
        return Decision(False, f"{primary}: no per-query values, so no paired test")
    alpha = 1.0 - test.confidence
    shown = (
        f"{primary} {candidate[primary]:.4f} vs {champion[primary]:.4f}: gain {test.gain:+.4f}, "
        f"{test.confidence:.0%} interval [{test.low:+.4f}, {test.high:+.4f}], p = {test.p_value:.4f} "
        f"over {test.n} queries"
    )
    if dropped:
        shown += f" ({dropped} left out: the candidate trained on their texts)"
    if test.low <= margin:
        return Decision(False, f"{shown}: the interval does not clear the margin {margin}")
    if test.p_value >= alpha:
        return Decision(False, f"{shown}: p >= {alpha:.2f}")
    for name, allowed in guards.items():
        drop = champion[name] - candidate[name]
        if drop > allowed:
            return Decision(
                False, f"guard {name} drops {drop:.4f} ({champion[name]:.4f} -> {candidate[name]:.4f}) > {allowed}"
            )
    return Decision(True, f"{shown}; guards hold")


def refuse_rolled_back(root: Path, candidate: str, decision: Decision) -> Decision:
    """A night never promotes an export that `gur rollback` took back (`gur promote` still can)."""
    mark = rolled_back(root).get(candidate)
    if not decision.promote or mark is None:
        return decision
    return Decision(
        False,
        f"{decision.reason}; but this export was rolled back (champion #{mark['number']}): "
        "only `gur promote` brings it back",
    )


def judge(
    root: Path, units: list[dict[str, str]], metrics: dict, gate_cfg, candidate: str, champion: str
) -> tuple[Any, dict[str, Any], PairedTest | None]:
    """(the gate's Decision, the evidence it read, the paired test) for one night; an export that was rolled
    back is refused whatever its numbers (only `gur promote` brings it back)."""
    g = gate_cfg
    evidence = primary_evidence(root, units, g.primary, candidate, champion)
    test = None
    if evidence["candidate"] is not None:
        test = paired_test(evidence["candidate"], evidence["champion"], g.confidence)
    cand, champ = metrics.get(candidate, {}), metrics.get(champion, {})
    shared = evidence["shared"]
    kept = 0 if evidence["candidate"] is None else len(evidence["candidate"])
    refusal = shared.refusal(kept) if shared is not None and shared.shared else None
    overlap = None if shared is None else evidence["overlap"]
    decision = gate(cand, champ, g.primary, g.margin, g.guards, test, overlap, refusal, evidence["dropped"])
    decision = refuse_rolled_back(root, candidate, decision)
    return decision, evidence, test


def test_columns(test: PairedTest | None) -> dict[str, float | int | None]:
    """The paired test's columns of a `promotions` row."""
    if test is None:
        return {}
    return {
        "gain": test.gain,
        "gain_low": test.low,
        "gain_high": test.high,
        "p_value": test.p_value,
        "confidence": test.confidence,
        "queries": test.n,
    }


@dataclass(frozen=True)
class Judged:
    """The candidate and the model in use, scored on the night's suite, and the gate's decision on them."""

    decision: Decision
    evidence: dict[str, Any]
    test: PairedTest | None
    metrics: dict[str, dict[str, float]]  # model -> metric -> value
    metrics_ref: dict[str, str]  # the evaluate output the metrics came from
    gate: GateSection  # the gate section, its primary metric resolved


def gate_evaluation(night: Night, models: list[str]) -> dict[str, Any]:
    """The evaluate flow's parameters for the gate: `models` on the night's suite and its guards."""
    e, suite = night.cfg.evaluate, night.suite
    return {
        "models": models,
        "stackoverflow": suite.stackoverflow,
        "stsb": e.stsb,
        "lee": e.lee,
        "demo_retrieval": False,
        "beir": [*e.beir, *suite.beir],
        "question_queries": e.question_queries,
        "root": str(night.base),
    }


def judged_night(night: Night, result: dict[str, Any], candidate: str, reference: str) -> Judged:
    """The gate on the evaluate flow's `result` for the candidate and the model it is judged against."""
    metrics = metrics_by_model(night.base, result["metrics"])
    g = night.cfg.gate
    g = g if g.primary != "auto" else replace(g, primary=night.suite.primary)
    decision, evidence, test = judge(night.base, result["units"], metrics, g, candidate, reference)
    return Judged(decision, evidence, test, metrics, result["metrics"], g)
