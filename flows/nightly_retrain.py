"""The `nightly-retrain` flow: one night, as a list of steps. Each step is a call into `tasks/nightly/` with what it
needs and what it returns; the flows it runs (the data stages, training, evaluation, embedding) are called here.

    night = open_night(cfg, base, name, state)      # tasks/nightly/night.py: the suite split, the recipe, the start
    inputs = data_stages(night)                      # build-pairs / mine-keywords on the training side
    plan, ratio = plan_of(night, inputs)             # tasks/nightly/plan.py: what fits the budget, printed
    trained = train_candidate(night, inputs, plan, ratio)       # the train flow, from the model in use
    judged = judge_candidate(night, trained)         # the evaluate flow on the suite, then the gate
    row = decision_row(...); set_champion(...)       # tasks/nightly/decision.py: the verdict, the new champion
    close_night(...)                                 # the catalog, retention (tasks/nightly/upkeep.py), the row
    embed_after_decision(...)                        # search's embeddings by the model in use, after the row

Configured by `nightly.toml` (tasks/nightly/config.py), never rewritten: the training side and the resolved
method are fields of the night. Nothing new (the data and training settings the champion was trained with) is a
`nothing-new` row and no training; an error on the way is a `failed` row, then raised. A run killed mid-training
resumes from its checkpoint next time (the same inputs keep their plan: tasks/nightly/kept_plan.py). A lock on
the data root keeps it to one writer at a time (a night, `gur promote`, `gur rollback`; a second fails at once,
naming the first). The flows a night runs hand their outputs up (`handed_up`) instead of refreshing the catalog
each: the night refreshes it before its retention (which keeps what the catalog's `main` shows) and once its
row is written.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.runtime import flow_run

from flows.build_pairs import build_pairs, corpus_documents
from flows.embed import night_embeddings
from flows.evaluate import evaluate, unit_calls
from flows.mine_keywords import mine_keywords
from flows.parameters import EvaluateParams, evaluation_sets
from flows.train import train_flow
from storage.champion import record_decision, root_lock, set_champion
from storage.layout import data_root
from storage.stage_output import ref_dir
from tasks.nightly.budget import Plan, measured_rates
from tasks.nightly.candidate import Trained, judged_against, train_parameters
from tasks.nightly.config import CONFIG_NAME, NightlyConfig, load_nightly_config
from tasks.nightly.decision import (
    amend_embedded,
    champion_record,
    decision_row,
    failed_row,
    nothing_new_row,
    unchanged,
    verdict_of,
)
from tasks.nightly.gate import Judged, gate_evaluation, judged_night
from tasks.nightly.night import Night, NightState, open_night
from tasks.nightly.plan import budget_line, night_plan, plans, units_on_disk
from tasks.nightly.probe import probed_rates
from tasks.nightly.recipe import documents_gur_share
from tasks.nightly.replay import fixed_replay
from tasks.nightly.report import decision_markdown, night_data, publish
from tasks.nightly.upkeep import retention
from tasks.runtime.catalog import handed_up, update_catalog

Inputs = dict[str, dict[str, str]]


@flow(name="nightly-retrain", log_prints=True)
def nightly_retrain(config_path: str | None = None, root: str | None = None) -> dict[str, Any]:
    """One nightly run; `config_path` defaults to `<root>/nightly.toml`. Returns the decision row."""
    base = data_root(root)
    cfg = load_nightly_config(config_path or base / CONFIG_NAME)
    name = flow_run.name or "nightly-retrain"
    with root_lock(base, f"flow run {name!r}"):
        return nightly_steps(cfg, base, name)


def nightly_steps(cfg: NightlyConfig, base: Path, name: str) -> dict[str, Any]:
    """The night's work; an error on the way is a `failed` decision row (with the error), then raised."""
    state = NightState()
    with handed_up() as made:
        try:
            return night_steps(cfg, base, name, state, made)
        except Exception as exc:
            record_decision(base, failed_row(name, state, exc))
            why = f"the night stopped: {type(exc).__name__}: {exc}"
            publish(decision_markdown("failed", why, state.candidate, "", {}, []))
            update_catalog(str(base), made)  # what the flows that finished wrote, and the row
            raise


def night_steps(cfg: NightlyConfig, base: Path, name: str, state: NightState, made: list) -> dict[str, Any]:
    """The night, top to bottom: data -> plan -> train -> gate -> decide (retention, the row) -> embed."""
    # --- data: the suite split off the corpus, then the data stages on its training side
    night = open_night(cfg, base, name, state)
    inputs = data_stages(night)
    data, brought = inputs["data"], night_data(base, inputs["data"], night.started)
    if unchanged(night, data):
        return nothing_new(night, data, brought, made)
    # --- plan: what fits the budget (a documents or TFCSG night on a held-out split)
    plan, ratio = plan_of(night, inputs)
    trained_at = time.time()
    # --- train: the candidate, from the model in use
    trained = train_candidate(night, inputs, plan, ratio)
    state.candidate = trained.candidate
    judged_at = time.time()
    # --- gate: both models on the suite and its guards
    judged = judge_candidate(night, trained)
    decided = time.time()
    # --- decide: the row, the new champion, retention
    actual = {
        "before_training_s": trained_at - night.started,
        "train_s": judged_at - trained_at,
        "gate_s": decided - judged_at,
        "decision_s": decided - night.started,
    }
    row = decision_row(night, trained, judged, plan, actual, brought)
    if plan:
        print(budget_line(plan, actual))
    if judged.decision.promote:
        set_champion(base, champion_record(night, trained, judged, data))
    verdict, refs = verdict_of(judged), [*made, data, trained.ref, judged.metrics_ref]
    recorded = close_night(night, refs, row, {trained.candidate: verdict})
    names = sorted({judged.gate.primary, *judged.gate.guards} | set(judged.metrics.get(trained.candidate, {})))
    shown = (verdict, row["reason"], trained.candidate, trained.reference, judged.metrics, names)
    publish(decision_markdown(*shown, judged.test, brought, row["gc"]))
    print(f"{verdict}: {row['reason']}; {time.time() - night.started:.0f} s")
    print(json.dumps({k: v for k, v in row.items() if k.endswith("metrics")}, indent=1))
    # --- embed: search's embeddings by the model in use (the view switches after a promotion)
    embed_after_decision(night, judged.decision.promote, recorded, row, made, refs)
    return row


def data_stages(night: Night) -> Inputs:
    """The training inputs for the method: `data`, what the night is judged new by and the champion records (a
    keywords output for tfcsg; the shuffle output `build-pairs` ends with for gur, and for documents when it trains
    on GUR's pairs, else its split output), and for documents `split`, the sentences its title and inverse-cloze
    pairs come from, and `pairs`, the shuffle output its GUR pairs come from."""
    c, cfg = night.corpus, night.cfg
    if night.method == "tfcsg":
        k = cfg.keywords
        unit = {"unit": k.unit, "k": k.k, "warm_start": k.warm_start}
        return {"data": mine_keywords(input_path=c.path, **c.reader_fields(), **unit, root=str(night.base))}
    refs = build_pairs(input_path=c.path, **c.reader_fields(), root=str(night.base))
    if night.method != "documents":
        return {"data": refs["shards"]}
    data = refs["shards"] if documents_gur_share(night.train) > 0 else refs["sentences"]
    return {"data": data, "split": refs["sentences"], "pairs": refs["shards"]}


def plan_of(night: Night, inputs: Inputs) -> tuple[Plan | None, float]:
    """(the plan, the replay ratio) of a planned night; (None, `[train] replay` as a number) of another."""
    if not plans(night):
        return None, fixed_replay(night.train)
    teacher = str(night.train.options.get("teacher") or "")
    rates = probed_rates(night, measured_rates(night.base, night.method, teacher))  # a first night: timed here, now
    return night_plan(night, inputs, units_on_disk(night.base, gate_units(night, night.start)), rates)


def gate_units(night: Night, model: str) -> list[dict[str, Any]]:
    """The evaluate flow's units (model x dataset) that the gate runs for `model`: none where no set is left."""
    try:
        p, _ = evaluation_sets(EvaluateParams(**gate_evaluation(night, [model])))
    except ValueError:  # no set to score: nothing is on disk (the gate's own run says what is missing)
        return []
    return unit_calls(p)


def train_candidate(night: Night, inputs: Inputs, plan: Plan | None, ratio: float) -> Trained:
    """The train flow on tonight's inputs (tasks/nightly/candidate.py: its parameters)."""
    ref = train_flow(**train_parameters(night, inputs, plan, ratio))
    return Trained(ref, str(ref_dir(night.base, ref) / "export"), judged_against(night))


def judge_candidate(night: Night, trained: Trained) -> Judged:
    """Both models through the evaluate flow on the night's suite and its guards, then the gate."""
    result = evaluate(**gate_evaluation(night, [trained.candidate, trained.reference]))
    return judged_night(night, result, trained.candidate, trained.reference)


def close_night(night: Night, made: list[dict[str, str]], row: dict, pending: dict[str, str]) -> Path:
    """The end every night shares before its embedding: the catalog refreshed with what the night's flows made
    (retention keeps what its `main` shows), retention (`pending`: the candidate and its verdict; the embeddings
    search serves are kept, and the next night's pass keeps the new ones), the decision row, the catalog again
    (the first night's `promotions` view). Returns the decision row's file."""
    base = night.base
    update_catalog(str(base), made)
    row.update(night.state.with_early_gc(retention(night.cfg, base, pending)))
    recorded = record_decision(base, row)
    update_catalog(str(base), made)
    return recorded


def nothing_new(night: Night, data: dict[str, str], brought: dict[str, Any], made: list) -> dict[str, Any]:
    """A night whose corpus and settings are the champion's: no training; new files still embedded."""
    row = nothing_new_row(night, data, brought)
    refs = [*made, data]
    recorded = close_night(night, refs, row, {})
    champion = row["champion"]
    publish(decision_markdown("nothing-new", row["reason"], "", champion, {}, [], night=brought, gc=row["gc"]))
    print(f"{row['reason']}; {time.time() - night.started:.1f} s")
    embed_after_decision(night, False, recorded, row, made, refs)  # new files only: usually a cache hit
    return row


def embed_after_decision(night: Night, promoted: bool, recorded: Path, row: dict, made: list, refs: list) -> None:
    """Search's embeddings by the model in use over every document the corpus folder yields, held-out ones
    included (training never sees those; the user's search does), after the decision is recorded and published:
    search keeps serving the complete previous embeddings meanwhile. An error is the note, never the night's
    failure (the decision is already taken). The embed flow hands its output up (into `made`) after the night's
    catalog refresh, so the catalog is refreshed once more with it: the `embeddings` view shows what search
    serves (`refs`: what the night's refresh showed)."""
    started, handed = time.time(), len(made)
    c = night.cfg.corpus  # the user's folder, not the training side
    try:
        documents = corpus_documents(str(night.base), input_path=c.path, **c.reader_fields())
    except Exception as exc:  # noqa: BLE001 - the decision stands
        note = f"failed: {type(exc).__name__}: {exc}"[:500]
    else:
        note = night_embeddings(night.base, documents, promoted=promoted)  # its own errors are its note
    amend_embedded(recorded, row, note, time.time() - started)
    print(f"embedding: {row['embedded']}")
    if len(made) > handed:
        update_catalog(str(night.base), [*refs, *made[handed:]])
