"""The `nightly-retrain` flow: data -> candidate -> candidate vs champion -> gate -> maybe a new champion.

One run, configured by `nightly.toml` (tasks/nightly/config.py):
1. the data stages on the corpus folder: `mine-keywords` for TFCSG, `build-pairs` for GUR (cache
   hits when no file changed);
2. nothing new: the data and the training settings are those the champion was trained with -> a
   `nothing-new` row and the run ends;
3. `train` a candidate, warm-started from the champion (the configured init on the first night);
   a run killed mid-training resumes from its checkpoint next time (same inputs, same folder);
4. `evaluate` candidate and champion (first night: the init model) on the frozen suite;
5. the gate (tasks/nightly/champion.py: `gate`): promote iff the primary metric gains at least the
   margin and no guard drops more than allowed; champion.json is replaced atomically and every
   decision is a `promotions` row and a Prefect markdown artifact.
A lock on the data root keeps it to one run at a time (a second run fails at once, naming the first).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from prefect import flow

from storage.layout import data_root
from storage.stage_output import ref_dir
from tasks.nightly.champion import gate, read_champion, record_decision, root_lock, set_champion
from tasks.nightly.config import CONFIG_NAME, NightlyConfig, load_nightly_config
from tasks.nightly.report import decision_markdown, metrics_by_model, publish, training_settings
from tasks.runtime.catalog import update_catalog


def data_stages(cfg: NightlyConfig, base: Path) -> dict[str, str]:
    """The training input for the method: a keywords output (tfcsg) or a shuffle output (gur)."""
    c = cfg.corpus
    if cfg.train.method == "tfcsg":
        from flows.mine_keywords import mine_keywords

        return mine_keywords(
            input_path=c.path,
            format=c.format,
            text_field=c.text_field,
            title_field=c.title_field,
            id_field=c.id_field,
            unit=cfg.keywords.unit,
            k=cfg.keywords.k,
            root=str(base),
        )
    from flows.build_pairs import build_pairs

    return build_pairs(
        input_path=c.path,
        format=c.format,
        text_field=c.text_field,
        title_field=c.title_field,
        id_field=c.id_field,
        root=str(base),
    )["shards"]


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


def nightly_steps(cfg: NightlyConfig, base: Path, name: str) -> dict[str, Any]:
    from flows.evaluate import evaluate
    from flows.train import train_flow
    from models.encoders import minilm_path

    started = time.time()
    data = data_stages(cfg, base)
    champion = read_champion(base)
    settings = training_settings(cfg)
    if champion and champion.get("data") == data and champion.get("settings") == settings:
        reason = f"nothing new: corpus and settings unchanged since champion #{champion['number']} ({data['path']})"
        row = {"decision": "nothing-new", "reason": reason, "champion": champion["export"], "flow_run": name}
        record_decision(base, row)
        update_catalog(str(base), [data])
        publish(decision_markdown("nothing-new", reason, "", champion["export"], {}, []))
        print(f"{reason}; {time.time() - started:.1f} s")
        return row

    t = cfg.train
    warm = champion["export"] if champion and (t.method == "tfcsg" or t.init_from) else ""
    init = warm or t.init_from or (str(minilm_path()) if t.method == "tfcsg" else "")
    kwargs: dict[str, Any] = {"keywords": data["fingerprint"]} if t.method == "tfcsg" else {"shards": data}
    ref = train_flow(
        method=t.method,
        preset=t.preset if t.preset != "auto" or t.method == "tfcsg" else None,
        steps=t.steps or None,
        init_from=init,
        options=dict(t.options),
        root=str(base),
        **kwargs,
    )
    candidate = str(ref_dir(base, ref) / "export")
    reference = champion["export"] if champion else (init or "untrained:" + candidate)
    e = cfg.evaluate
    result = evaluate(
        models=[candidate, reference],
        stackoverflow=e.stackoverflow,
        stsb=e.stsb,
        lee=False,
        demo_retrieval=False,
        beir=e.beir,
        question_queries=e.question_queries,
        root=str(base),
    )
    metrics = metrics_by_model(base, result["metrics"])
    g = cfg.gate
    decision = gate(metrics.get(candidate, {}), metrics.get(reference, {}), g.primary, g.margin, g.guards)
    verdict = "promoted" if decision.promote else "refused"
    who = f"champion #{champion['number']}" if champion else "the initial model"
    reason = f"against {who}: {decision.reason}"
    row = {
        "decision": verdict,
        "reason": reason,
        "candidate": candidate,
        "champion": reference,
        "candidate_metrics": metrics.get(candidate, {}),
        "champion_metrics": metrics.get(reference, {}),
        "flow_run": name,
    }
    if decision.promote:
        pointer = {
            "export": candidate,
            "train": ref,
            "data": data,
            "settings": settings,
            "method": t.method,
            "metrics": metrics.get(candidate, {}),
            "config": cfg.source,
            "flow_run": name,
        }
        set_champion(base, pointer)
    record_decision(base, row)
    update_catalog(str(base), [data, ref, result["metrics"]])
    names = sorted({g.primary, *g.guards} | set(metrics.get(candidate, {})))
    publish(decision_markdown(verdict, reason, candidate, reference, metrics, names))
    print(f"{verdict}: {reason}; {time.time() - started:.0f} s")
    print(json.dumps({k: v for k, v in row.items() if k.endswith("metrics")}, indent=1))
    return row
