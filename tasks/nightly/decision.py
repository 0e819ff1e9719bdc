"""The night's decision as a `promotions` row: promoted, refused, nothing new or failed, with its evidence.

    row = decision_row(night, trained, judged, plan, actual, data)    # the candidate judged
    row = nothing_new_row(night, data)                                # corpus and settings are the champion's
    row = failed_row(night_name, state, exc)                          # the night stopped on the way
    amend_embedded(recorded, row, note, took)                         # the embedding's note, after it ran

A decision is recorded before the embedding for search starts (search serves the previous embeddings
meanwhile), so its `embedded` column says `pending` until `amend_embedded` writes what the embedding did.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from storage.champion import amend_decision
from storage.progress import current_logger
from tasks.nightly.budget import Plan
from tasks.nightly.candidate import Trained
from tasks.nightly.gate import Judged, test_columns
from tasks.nightly.night import Night, NightState

PENDING_EMBED = (
    "pending: search serves the previous embeddings until the night's embedding ends (`gur embed` resumes it)"
)


def verdict_of(judged: Judged) -> str:
    return "promoted" if judged.decision.promote else "refused"


def decision_row(
    night: Night, trained: Trained, judged: Judged, plan: Plan | None, actual: dict[str, float], data: dict
) -> dict[str, Any]:
    """The row of a night that judged its candidate: the verdict and why, both models' metrics, the suite, the
    paired test's columns, what the night's data stages did (`data`: report.night_data), the plan and what each
    part took (`actual`); the embedding's note pending."""
    champion, metrics, candidate, reference = night.champion, judged.metrics, trained.candidate, trained.reference
    who = f"champion #{champion['number']}" if champion else f"the initial model ({reference})"
    return {
        "decision": verdict_of(judged),
        "reason": f"against {who}: {judged.decision.reason}",
        "candidate": candidate,
        "champion": reference,
        "candidate_metrics": metrics.get(candidate, {}),
        "champion_metrics": metrics.get(reference, {}),
        "flow_run": night.name,
        "primary_metric": judged.gate.primary,
        "suite": night.suite.name,
        "suite_fingerprint": judged.evidence["suite_fingerprint"],
        **overlap_columns(judged.evidence),
        **test_columns(judged.test),
        **data,
        "plan": plan.record() if plan else None,
        "actual": json.dumps({k: round(v, 1) for k, v in actual.items()}, sort_keys=True),
        "embedded": PENDING_EMBED,
    }


def overlap_columns(evidence: dict[str, Any]) -> dict[str, Any]:
    """The row's overlap: the queries left out of the paired test (None: the candidate's training input is
    unknown), the suite's texts it trained on and a sample of them."""
    shared = evidence["shared"]
    return {
        "overlap": None if shared is None else evidence["dropped"],
        "overlap_texts": evidence["overlap"],
        "overlap_sample": json.dumps(list(shared.sample), ensure_ascii=False) if shared and shared.sample else None,
    }


def champion_record(night: Night, trained: Trained, judged: Judged, data: dict[str, str]) -> dict[str, Any]:
    """What champion.json says of a promoted candidate: its export and run, the data and settings it was
    trained with (what tells the next night whether anything is new), its metrics and where it came from."""
    return {
        "export": trained.candidate,
        "train": trained.ref,
        "data": data,
        "settings": night.settings,
        "method": night.method,
        "metrics": judged.metrics.get(trained.candidate, {}),
        "config": night.cfg.source,
        "flow_run": night.name,
    }


def unchanged(night: Night, data: dict[str, str]) -> bool:
    """Whether the night's training input and settings are those the champion was trained with."""
    c = night.champion
    return bool(c) and c.get("data") == data and c.get("settings") == night.settings


def nothing_new_row(night: Night, data: dict[str, str], night_data: dict[str, Any]) -> dict[str, Any]:
    """The row of a night whose corpus and settings are the champion's: no training."""
    champion = night.champion  # there is one: the night is unchanged against it
    reason = f"nothing new: corpus and settings unchanged since champion #{champion['number']} ({data['path']})"
    row = {"decision": "nothing-new", "reason": reason, "champion": champion["export"], "flow_run": night.name}
    return {**row, **night_data, "embedded": PENDING_EMBED}


def failed_row(name: str, state: NightState, exc: Exception) -> dict[str, Any]:
    """A stopped night's `failed` row: what it had done (state) and the error."""
    row = {"decision": "failed", "reason": f"the night stopped: {type(exc).__name__}", "flow_run": name}
    return {**row, **state.columns(), "error": f"{type(exc).__name__}: {exc}"[:2000]}


def amend_embedded(recorded: Path, row: dict[str, Any], note: str, took: float) -> None:
    """The decision row's `embedded` note, `pending` until now: what the embedding did and how long it took
    (and `actual`'s `embed_s`); `row` updated too. A row that cannot be amended keeps its note in the log."""
    row["embedded"] = f"{note} ({took:.0f} s after the decision)"
    fields = {"embedded": row["embedded"]}
    if row.get("actual"):
        actual = {**json.loads(row["actual"]), "embed_s": round(took, 1)}
        row["actual"] = fields["actual"] = json.dumps(actual, sort_keys=True)
    try:
        amend_decision(recorded, fields)
    except Exception as exc:  # noqa: BLE001 - the decision stands; the note is in the log
        current_logger(__name__).warning("decision row %s: embedding note not recorded: %s", recorded, exc)
