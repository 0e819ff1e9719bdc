"""The `nightly-retrain` flow: data -> candidate -> candidate vs champion -> gate -> maybe a new champion.

One run, configured by `nightly.toml` (tasks/nightly/config.py):
1. the gate's suite: a seeded hash-based held-out share of the corpus's records, read by ingest's readers
   (labelled: question retrieval; unlabeled: retrieval among held-out documents), or a suite the user
   names; the data stages then run on the rest of the corpus: `mine-keywords` for TFCSG, `build-pairs`
   for GUR (cache hits when no file changed);
2. nothing new: the data and the training settings are those the champion was trained with -> a
   `nothing-new` row and the run ends;
3. `train` a candidate, warm-started from the champion (the configured init on the first night);
   a run killed mid-training resumes from its checkpoint next time (same inputs, same folder);
4. `evaluate` candidate and champion (first night: the init model, or MiniLM for a GUR model trained
   from scratch) on the suite;
5. the gate (storage/champion.py: `gate`): promote iff the suite shares no text with the
   candidate's training input, the primary metric's paired gain is above its noise and the margin
   (tasks/nightly/significance.py) and no guard drops more than allowed; an export that was rolled
   back is never promoted by a night. champion.json is replaced atomically and every decision,
   a failed night's included, is a `promotions` row and a Prefect markdown artifact.
A lock on the data root keeps it to one writer at a time (a night, `gur promote`, `gur rollback`;
a second fails at once, naming the first).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from prefect import flow

from flows.embed import night_embeddings
from storage.champion import amend_decision, read_champion, record_decision, record_start, root_lock, set_champion
from storage.disk_space import free_bytes, megabytes, training_space
from storage.layout import data_root, record_path
from storage.manifest import read_manifest
from storage.stage_output import ref_dir
from tasks.nightly.config import CONFIG_NAME, NightlyConfig, load_nightly_config
from tasks.nightly.gate import judge, test_columns
from tasks.nightly.holdout import gate_suite
from tasks.nightly.report import decision_markdown, metrics_by_model, night_data, publish, training_settings
from tasks.runtime.catalog import handed_up, update_catalog


def data_stages(cfg: NightlyConfig, base: Path) -> dict[str, dict[str, str]]:
    """The training inputs for the method: `data`, what the night is judged new by and the champion records (a
    keywords output for tfcsg; the shuffle output `build-pairs` ends with for gur, and for documents when it trains
    on GUR's pairs, else its split output, as before they could), and for documents `split`, the sentences its
    title and inverse-cloze pairs come from, and `pairs`, the shuffle output its GUR pairs come from."""
    c = cfg.corpus
    if cfg.train.method == "tfcsg":
        from flows.mine_keywords import mine_keywords

        keywords = mine_keywords(
            input_path=c.path,
            **c.reader_fields(),
            unit=cfg.keywords.unit,
            k=cfg.keywords.k,
            warm_start=cfg.keywords.warm_start,
            root=str(base),
        )
        return {"data": keywords}
    from flows.build_pairs import build_pairs

    refs = build_pairs(input_path=c.path, **c.reader_fields(), root=str(base))
    if cfg.train.method != "documents":
        return {"data": refs["shards"]}
    data = refs["shards"] if documents_gur_share(cfg) > 0 else refs["sentences"]
    return {"data": data, "split": refs["sentences"], "pairs": refs["shards"]}


def documents_gur_share(cfg: NightlyConfig) -> float:
    """The share of a documents candidate's batches that are GUR's pairs: `[train] options`, else the preset's."""
    from models.training.presets import DOCUMENT_PRESETS

    return float(cfg.train.options.get("gur_share", DOCUMENT_PRESETS["cpu"].get("gur_share", 0.0)))


def resolve_method(cfg: NightlyConfig) -> NightlyConfig:
    """`method = "auto"`: the recipe for the corpus's shape (tasks/nightly/recipe.py), said in one line. Read on
    the training side, so the held-out records never decide it."""
    if cfg.train.method != "auto":
        return cfg
    from tasks.nightly.recipe import choose_method, corpus_shape, sample_texts

    method, why = choose_method(corpus_shape(sample_texts(cfg.corpus)))
    print(why)
    return replace(cfg, train=replace(cfg.train, method=method))


def replay_options(
    method: str, ratio: float, champion: dict[str, Any] | None, base: Path, capped: bool = False
) -> dict[str, Any]:
    """What a candidate on a grown corpus trains on (models/training/replay.py): with a replay `ratio` R
    (`[train] replay`, resolved by the plan) the rows new since the champion's data (TFCSG: its keywords output;
    documents: the split output its training read) plus a seeded sample of the older ones, R times as many;
    with a capped run (`capped`: the budget cut the steps) the new ones first, then older ones as far as the
    steps go. The first night, and a champion from another kind of input, train on everything."""
    if not (ratio or capped) or method not in ("tfcsg", "documents"):
        return {}
    earlier = champion_input(champion, base, method)
    out = {"new_first": True} if capped else {}  # the rows the steps show, chosen before clustering reads them
    return {**out, "replay_since": earlier, "replay_ratio": float(ratio)} if earlier else out


def fixed_replay(t: Any) -> float:
    """`[train] replay` where no plan resolves "auto" (a GUR night, a named suite): a number as given, else 0."""
    return 0.0 if t.replay == "auto" else float(t.replay)


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


def run_name() -> str:
    try:
        from prefect.runtime import flow_run

        return flow_run.name or "nightly-retrain"
    except Exception:
        return "nightly-retrain"


@flow(name="nightly-retrain", log_prints=True)
def nightly_retrain(config_path: str | None = None, root: str | None = None) -> dict[str, Any]:
    """One nightly run; `config_path` defaults to `<root>/nightly.toml`. Returns the decision row."""
    base = data_root(root)
    cfg = load_nightly_config(config_path or base / CONFIG_NAME)
    name = run_name()
    with root_lock(base, f"flow run {name!r}"):
        return nightly_steps(cfg, base, name)


@dataclass
class NightState:
    """What a night has done so far that its decision row names, a failed night's too: the candidate once
    trained (gc then counts it as judged: its weights can go) and what retention freed at the start."""

    candidate: str = ""
    early_gc: str = ""  # `make_room`'s retention, when it ran
    early_freed: int = 0

    def columns(self) -> dict[str, Any]:
        """The decision row's columns of a night that stopped: what it had done."""
        out: dict[str, Any] = {"gc": self.early_gc, "gc_freed_bytes": self.early_freed} if self.early_gc else {}
        return {**out, "candidate": self.candidate} if self.candidate else out

    def with_early_gc(self, done: dict[str, Any]) -> dict[str, Any]:
        """The night's retention columns: the end's, after what `make_room` freed at the start when it ran."""
        if not self.early_gc:
            return done
        freed = self.early_freed + done.get("gc_freed_bytes", 0)
        return {"gc": f"{self.early_gc}; at the end: {done['gc']}", "gc_freed_bytes": freed}


def nightly_steps(cfg: NightlyConfig, base: Path, name: str) -> dict[str, Any]:
    """The night's work; an error on the way is a `failed` decision row (with the error), then raised. The flows it
    runs hand their outputs up (`handed_up`) instead of refreshing the catalog each: the night refreshes it before
    its retention (which keeps what the catalog's `main` shows) and once its row is written."""
    state = NightState()
    with handed_up() as made:
        try:
            return _night(cfg, base, name, state, made)
        except Exception as exc:
            failed(base, name, state, exc)
            update_catalog(str(base), made)  # what the flows that finished wrote, and the row
            raise


def failed(base: Path, name: str, state: NightState, exc: Exception) -> None:
    """A stopped night's `failed` row and artifact."""
    row = {"decision": "failed", "reason": f"the night stopped: {type(exc).__name__}", "flow_run": name}
    record_decision(base, {**row, **state.columns(), "error": f"{type(exc).__name__}: {exc}"[:2000]})
    publish(decision_markdown("failed", f"{row['reason']}: {exc}", state.candidate, "", {}, []))


def night_plan(
    cfg: NightlyConfig,
    base: Path,
    suite: Any,
    started: float,
    inputs: dict[str, dict[str, str]],
    champion: dict[str, Any] | None,
) -> tuple[Any, float]:
    """(the budget's plan, the replay ratio the candidate trains with), the plan printed before training
    (tasks/nightly/budget.py): a documents or TFCSG night on a held-out split. A later night whose full epoch
    does not fit trains on what is new plus a replay sample (`[train] replay`, "auto": budget.replay_ratio),
    its length counted here on the night's input against the champion's. The same night run again after a stop
    keeps its plan (tasks/nightly/kept_plan.py), so its training resumes. No plan (None) for a GUR night (its
    own minutes of training, GUR_NIGHT) or a named suite (the training side is not counted)."""
    from models.training.presets import question_config, resolve_preset
    from tasks.nightly.budget import Work, full_steps, measured_rates, plan_night, replay_ratio, replay_rows
    from tasks.nightly.kept_plan import keep_plan, kept_plan, night_key, steps_done
    from tasks.nightly.what_is_new import count_new

    t, method = cfg.train, cfg.train.method
    if method not in ("documents", "tfcsg") or not suite.train_records:
        return None, fixed_replay(t)
    preset = question_config(method, resolve_preset(t.preset, gpu=False), dict(t.options))
    share = documents_gur_share(cfg) if method == "documents" else 0.0

    def length(records: int) -> int:
        return t.steps or full_steps(records, preset["batch_size"], preset["epochs"], share)

    guard = bool(cfg.evaluate.stsb or cfg.evaluate.lee)
    start = start_of(cfg, champion)
    reused_suite, reused_guard = units_on_disk(cfg, base, suite, start)  # the model in use's
    work = Work(
        steps=length(suite.train_records),
        suite_docs=suite.scored,
        corpus_docs=suite.records,
        guard=guard,
        reused_suite=reused_suite,
        reused_guard=reused_guard,
    )
    budget_s, rates = cfg.budget.minutes * 60, measured_rates(base, method)
    key = night_key(method, inputs, record_path(base, start), training_settings(cfg), cfg.budget.minutes)
    kept = kept_plan(base, key)
    if kept:  # the same night run again after a stop: its steps, replay and ratio, so its training resumes
        done = steps_done(base, kept["planned_at"], kept["steps"], start)
        work = replace(work, steps=kept["full_steps"], replay=kept["replay"])
        plan = plan_night(budget_s, time.time() - started, work, rates, {**kept, "steps_done": done})
        ratio = kept["ratio"]
    else:
        plan = plan_night(budget_s, time.time() - started, work, rates)
        earlier = champion_input(champion, base, method)
        ratio = replay_ratio(t.replay, bool(earlier), not plan.capped)
        if ratio and earlier and not t.steps:
            stage = "keywords" if method == "tfcsg" else "split"
            now = ref_dir(base, inputs["data"] if method == "tfcsg" else inputs["split"])
            new, rows = count_new(method, str(now), str(ref_dir(base, {"stage": stage, "fingerprint": earlier})))
            if new:  # where nothing is new every row is an older one: the ratio does not apply
                held = float(preset.get("heldout_fraction") or 0)  # the trainer's own held-out share of the input
                scaled = replay_rows(new, rows, ratio) * (1 - held)
                replay = {"ratio": ratio, "new_rows": new, "rows": rows, "epoch_steps": work.steps}
                work = replace(work, steps=min(work.steps, length(math.ceil(scaled))), replay=replay)
                plan = plan_night(budget_s, time.time() - started, work, rates)
        keep_plan(base, key, plan, ratio, time.time())
    for line in plan.lines():
        print(line)
    return plan, ratio


def budget_line(plan: Any, actual: dict[str, float]) -> str:
    """The decision's time against the plan's."""
    took, budget = actual["decision_s"], plan.budget_s
    off = (took - plan.decision_s) / plan.decision_s if plan.decision_s else 0.0
    return (
        f"budget: decided after {took / 60:.1f} min of {budget / 60:.0f} (plan {plan.decision_s / 60:.1f} min, "
        f"{off:+.0%}); training {actual['train_s']:.0f} s (plan {plan.train_s:.0f}), gate {actual['gate_s']:.0f} s "
        f"(plan {plan.gate_s:.0f})"
    )


def train_candidate(
    cfg: NightlyConfig,
    base: Path,
    inputs: dict[str, dict[str, str]],
    champion: dict[str, Any] | None,
    steps: int = 0,
    capped: bool = False,
    ratio: float | None = None,
) -> tuple[dict[str, str], str, str]:
    """(train output, candidate export, the model it is judged against): warm-started from the model in use (the
    champion, else the configured init, else MiniLM); `method = "gur"` with GUR_NIGHT's settings and time budget;
    documents on the split's sentences and the night's own shuffle output (`inputs`: data_stages). `steps`: the
    budget's cut (0: the configured or the recipe's length); `capped`: it cut them, so the rows new since the
    champion's data go first (replay_options); `ratio`: the plan's replay ratio (None: `[train] replay` as a number,
    "auto" as 0)."""
    from flows.train import train_flow
    from tasks.nightly.recipe import GUR_NIGHT

    t = cfg.train
    init = start_of(cfg, champion)
    replay = replay_options(t.method, fixed_replay(t) if ratio is None else ratio, champion, base, capped)
    data = inputs["data"]
    kwargs: dict[str, Any] = {"keywords": data["fingerprint"]} if t.method == "tfcsg" else {"shards": data}
    if t.method == "documents":
        kwargs = {"shards": inputs["split"], "pairs": inputs["pairs"]}
    ref = train_flow(
        method=t.method,
        preset=t.preset if t.preset != "auto" or t.method != "gur" else None,
        steps=steps or t.steps or None,
        init_from=init,
        options={**(GUR_NIGHT if t.method == "gur" else {}), **t.options, **replay},
        root=str(base),
        **kwargs,
    )
    reference = champion["export"] if champion else init
    return ref, str(ref_dir(base, ref) / "export"), reference


def start_of(cfg: NightlyConfig, champion: dict[str, Any] | None) -> str:
    """The model the candidate trains from, whatever the method: the champion, else the configured init, else
    the shipped MiniLM."""
    from models.encoders import minilm_path

    return champion["export"] if champion else cfg.train.init_from or str(minilm_path())


def make_room(cfg: NightlyConfig, base: Path, start: str, state: NightState) -> None:
    """Retention at the start of a night when the disk holding the root has less free space than a candidate
    writes (`training_space`): a full disk otherwise stops the night in its data stages or its training, and
    retention only runs at its end. What it freed goes into `state` (the decision row's `gc`, a failed
    night's too)."""
    need, free = training_space(start), free_bytes(base)
    if free >= need:
        return
    low = f"low on space: {megabytes(free)} free on the disk holding {base}; a candidate writes {megabytes(need)}"
    if not cfg.retention.apply:
        print(f"{low}, and [retention] apply is off: training may run out of space")
        return
    print(f"{low}: retention runs first")
    done = retention(cfg, base, {})
    state.early_gc, state.early_freed = f"at the start: {done['gc']}", done.get("gc_freed_bytes", 0)
    if (left := free_bytes(base)) < need:
        print(f"still {megabytes(left)} free after retention: the night may run out of space")


def retention(cfg: NightlyConfig, base: Path, pending: dict[str, str]) -> dict[str, Any]:
    """The night's gc (`[retention]`, tasks/retention/): the decision row's `gc` and `gc_freed_bytes`. It waits
    up to 10 minutes for other builds on the root, then skips (the next night or `gur gc` catches up); a gc
    that fails is a `failed: ...` note in the row, never a failed night (the decision is already taken)."""
    if not cfg.retention.apply:
        return {"gc": "off ([retention] apply = false)"}
    from storage.builds_lock import RootBusy, builds_lock
    from tasks.retention.collect import collect_locked, summary

    try:
        with builds_lock(base, exclusive=True, wait_s=600, what="the night skipped its gc"):
            result = collect_locked(base, cfg.retention.config(), True, pending)
    except RootBusy as exc:
        return {"gc": f"skipped: {exc}"}
    except Exception as exc:  # the night's decision stands (a promotion is already made): gc is only upkeep
        from storage.progress import current_logger

        current_logger(__name__).warning(
            "retention failed, the night's decision stands; `gur gc --apply` retries it: %s: %s",
            type(exc).__name__,
            exc,
        )
        return {"gc": f"failed: {type(exc).__name__}: {exc}"[:500]}
    print(f"retention: {summary(result)}")
    return {"gc": summary(result), "gc_freed_bytes": result.freed}


def embed_corpus(corpus: Any, base: Path, promoted: bool) -> str:
    """Search's embeddings by the model in use over every document the corpus folder yields, held-out ones
    included (training never sees those; the user's search does). The decision row's `embedded` note; an error
    is the note, never the night's failure (the decision is already taken)."""
    from flows.build_pairs import corpus_documents

    try:
        documents = corpus_documents(str(base), input_path=corpus.path, **corpus.reader_fields())
    except Exception as exc:
        return f"failed: {type(exc).__name__}: {exc}"[:500]
    return night_embeddings(base, documents, promoted=promoted)


PENDING_EMBED = (
    "pending: search serves the previous embeddings until the night's embedding ends (`gur embed` resumes it)"
)


def embed_after_decision(corpus: Any, base: Path, promoted: bool, decision: Path, row: dict) -> None:
    """The night's embedding, after its decision is recorded and published: search keeps serving the complete
    previous embeddings meanwhile (the view switches when the new output is complete), and the decision row's
    `embedded` note, `pending` until now, says what it did and how long it took."""
    started = time.time()
    note = embed_corpus(corpus, base, promoted=promoted)
    took = time.time() - started
    row["embedded"] = f"{note} ({took:.0f} s after the decision)"
    fields = {"embedded": row["embedded"]}
    if row.get("actual"):
        actual = {**json.loads(row["actual"]), "embed_s": round(took, 1)}
        row["actual"] = fields["actual"] = json.dumps(actual, sort_keys=True)
    try:
        amend_decision(decision, fields)
    except Exception as exc:  # noqa: BLE001 - the decision stands; the note is in the log
        from storage.progress import current_logger

        current_logger(__name__).warning("decision row %s: embedding note not recorded: %s", decision, exc)
    print(f"embedding: {row['embedded']}")


def _night(cfg: NightlyConfig, base: Path, name: str, state: NightState, made: list[dict[str, str]]) -> dict[str, Any]:
    started = time.time()
    corpus = cfg.corpus  # the user's folder, before the held-out split replaces it with its training side
    for note in cfg.notes:
        print(note)
    champion = read_champion(base)
    make_room(cfg, base, start_of(cfg, champion), state)  # before the night writes anything
    cfg, suite = gate_suite(cfg, base)
    cfg = resolve_method(cfg)
    if champion is None:  # the model in use until a promotion: recorded, so embed, search and `gur models` say so
        record_start(base, start_of(cfg, None), cfg.source)
    inputs = data_stages(cfg, base)
    data = inputs["data"]
    night = night_data(base, data, started)
    settings = training_settings(cfg)
    if champion and champion.get("data") == data and champion.get("settings") == settings:
        return nothing_new(
            cfg,
            base,
            name,
            state,
            corpus=corpus,
            champion=champion,
            data=data,
            night=night,
            started=started,
            made=made,
        )
    plan, ratio = night_plan(cfg, base, suite, started, inputs, champion)
    trained_at = time.time()
    capped = bool(plan and plan.capped)
    steps = plan.steps if capped else 0
    ref, candidate, reference = train_candidate(cfg, base, inputs, champion, steps, capped, ratio)
    state.candidate = candidate
    judged_at = time.time()
    judged = judge_candidate(cfg, base, suite, candidate, reference)
    decided = time.time()
    actual = {
        "before_training_s": trained_at - started,
        "train_s": judged_at - trained_at,
        "gate_s": decided - judged_at,
        "decision_s": decided - started,
    }
    decision, metrics, g = judged.decision, judged.metrics, judged.gate
    verdict = "promoted" if decision.promote else "refused"
    who = f"champion #{champion['number']}" if champion else f"the initial model ({reference})"
    reason = f"against {who}: {decision.reason}"
    row = {
        "decision": verdict,
        "reason": reason,
        "candidate": candidate,
        "champion": reference,
        "candidate_metrics": metrics.get(candidate, {}),
        "champion_metrics": metrics.get(reference, {}),
        "flow_run": name,
        "primary_metric": g.primary,
        "suite": suite.name,
        "suite_fingerprint": judged.evidence["suite_fingerprint"],
        "overlap": judged.evidence["overlap"],
        **test_columns(judged.test),
        **night,
        "plan": plan.record() if plan else None,
        "actual": json.dumps({k: round(v, 1) for k, v in actual.items()}, sort_keys=True),
    }
    if plan:
        print(budget_line(plan, actual))
    if decision.promote:
        pointer = {"export": candidate, "train": ref, "data": data, "settings": settings, "method": cfg.train.method}
        set_champion(base, {**pointer, "metrics": metrics.get(candidate, {}), "config": cfg.source, "flow_run": name})
    row["embedded"] = PENDING_EMBED
    recorded = close_night(cfg, base, state, [*made, data, ref, judged.metrics_ref], row, {candidate: verdict})
    names = sorted({g.primary, *g.guards} | set(metrics.get(candidate, {})))
    publish(decision_markdown(verdict, reason, candidate, reference, metrics, names, judged.test, night, row["gc"]))
    print(f"{verdict}: {reason}; {time.time() - started:.0f} s")
    print(json.dumps({k: v for k, v in row.items() if k.endswith("metrics")}, indent=1))
    embed_after_decision(corpus, base, decision.promote, recorded, row)  # the view switches after a promotion
    return row


def close_night(
    cfg: NightlyConfig, base: Path, state: NightState, made: list[dict[str, str]], row: dict, pending: dict[str, str]
) -> Path:
    """The end every night shares before its embedding: the catalog refreshed with what the night's flows made
    (retention keeps what its `main` shows), retention (`pending`: the candidate and its verdict; the embeddings
    search serves are kept, and the next night's pass keeps the new ones), the decision row, the catalog again
    (the first night's `promotions` view). Returns the decision row's file."""
    update_catalog(str(base), made)
    row.update(state.with_early_gc(retention(cfg, base, pending)))
    recorded = record_decision(base, row)
    update_catalog(str(base), made)
    return recorded


def nothing_new(
    cfg: NightlyConfig,
    base: Path,
    name: str,
    state: NightState,
    *,
    corpus: Any,
    champion: dict,
    data: dict,
    night: dict,
    started: float,
    made: list[dict[str, str]],
) -> dict[str, Any]:
    """The row of a night whose corpus and settings are the champion's: no training; new files still embedded."""
    reason = f"nothing new: corpus and settings unchanged since champion #{champion['number']} ({data['path']})"
    row = {"decision": "nothing-new", "reason": reason, "champion": champion["export"], "flow_run": name, **night}
    row["embedded"] = PENDING_EMBED
    recorded = close_night(cfg, base, state, [*made, data], row, {})
    publish(decision_markdown("nothing-new", reason, "", champion["export"], {}, [], night=night, gc=row["gc"]))
    print(f"{reason}; {time.time() - started:.1f} s")
    embed_after_decision(corpus, base, False, recorded, row)  # new files only: usually a cache hit
    return row


@dataclass(frozen=True)
class Judged:
    """The candidate and the model in use, scored on the night's suite, and the gate's decision on them."""

    decision: Any  # tasks/nightly/gate.py: Decision
    evidence: dict[str, Any]
    test: Any
    metrics: dict[str, dict[str, float]]  # model -> metric -> value
    metrics_ref: dict[str, str]  # the evaluate output the metrics came from
    gate: Any  # the gate section, its primary metric resolved


def gate_evaluation(cfg: NightlyConfig, base: Path, suite: Any, models: list[str]) -> dict[str, Any]:
    """The evaluate flow's parameters for the gate: `models` on the night's suite and its guards."""
    e = cfg.evaluate
    return {
        "models": models,
        "stackoverflow": suite.stackoverflow,
        "stsb": e.stsb,
        "lee": e.lee,
        "demo_retrieval": False,
        "beir": [*e.beir, *suite.beir],
        "question_queries": e.question_queries,
        "root": str(base),
    }


def units_on_disk(cfg: NightlyConfig, base: Path, suite: Any, model: str) -> tuple[float, float]:
    """The shares of `model`'s gate units already on disk, (the suite's, the guard's): the gate reuses them (the
    model in use's guard on every later night, its suite where the held-out side did not change), so the plan
    does not count them."""
    from flows.evaluate import unit_calls
    from flows.parameters import EvaluateParams, evaluation_sets
    from tasks.evaluate.suite import SIMILARITY_KINDS
    from tasks.evaluate.task import unit_done

    try:
        p, _ = evaluation_sets(EvaluateParams(**gate_evaluation(cfg, base, suite, [model])))
    except ValueError:  # no set to score: nothing is on disk (the gate's own run says what is missing)
        return 0.0, 0.0
    calls = unit_calls(p)
    guards = [c for c in calls if c["dataset"].kind in SIMILARITY_KINDS]  # the gate's guards; the rest: its suite
    rest = [c for c in calls if c["dataset"].kind not in SIMILARITY_KINDS]

    def share(units: list[dict[str, Any]]) -> float:
        return sum(unit_done(root=str(base), **c) for c in units) / len(units) if units else 0.0

    return share(rest), share(guards)


def judge_candidate(cfg: NightlyConfig, base: Path, suite: Any, candidate: str, reference: str) -> Judged:
    """Both models through the evaluate flow on the night's suite and its guards, then the gate."""
    from flows.evaluate import evaluate

    result = evaluate(**gate_evaluation(cfg, base, suite, [candidate, reference]))
    metrics = metrics_by_model(base, result["metrics"])
    g = cfg.gate if cfg.gate.primary != "auto" else replace(cfg.gate, primary=suite.primary)
    decision, evidence, test = judge(base, result["units"], metrics, g, candidate, reference)
    return Judged(decision, evidence, test, metrics, result["metrics"], g)
