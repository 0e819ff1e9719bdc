"""The `train` flow: one training run, `method` gur (shard pairs), tfcsg (keywords), simcse (texts) or documents
(a split output's sentences, and a shuffle output's GUR pairs)."""

from __future__ import annotations

import time
from typing import Any

from prefect import flow

from models.training.presets import METHODS, OBJECTIVES
from storage.builds_lock import holds_root
from storage.layout import data_root
from storage.stage_output import latest_ref, ref_complete, ref_manifest, stage_ref
from tasks.runtime.artifacts import publish_train_artifacts
from tasks.runtime.catalog import catalog_at_end
from tasks.runtime.stage_cache import run_stage
from tasks.train.task import check_fingerprint, file_ref, train

# GUR-Small for 10,000 steps (TrainConfig's own preset and max_steps suit tests); pooling, lr: TrainConfig's.
GUR_DEFAULTS = dict(preset="small", steps=10000)


def question_source(base, keywords: str | None, texts: str | None, method: str) -> dict[str, str]:
    """The keywords stage `keywords` (a fingerprint; default the newest complete one) or, for SimCSE, a text file."""
    if texts:
        if method != "simcse":
            raise ValueError(f"method {method!r} needs keyword sequences: pass a keywords stage, not a text file")
        return file_ref(texts)
    if keywords:
        ref = {"stage": "keywords", "fingerprint": check_fingerprint(keywords), "path": f"keywords/{keywords}"}
        if not ref_complete(base, ref):
            raise FileNotFoundError(f"no complete keywords output {keywords!r} under {base} (see `gur catalog`)")
        return ref
    return latest_ref(base, "keywords")


def gur_pairs_source(base, config: dict[str, Any], pairs: dict[str, str] | None, split: dict[str, str]) -> None:
    """A documents run with `gur_share` > 0 trains on a shuffle output's GUR pairs too: `pairs`, else the newest
    complete one mined from the split output it trains on (through the manifests' lineage). Its fingerprint goes
    into the config (`gur_pairs`), so the run's own fingerprint and lineage name it. Without one (a sentences file,
    a split never paired and shuffled), the run trains on the structure pairs alone and says so."""
    if config.get("gur_share", 0.0) <= 0:
        config.pop("gur_pairs", None)
        return
    if config.get("gur_pairs"):  # named in the options: the task checks it
        return
    if pairs is None:
        pairs = shuffle_of(base, split)
    elif not ref_complete(base, pairs):
        raise FileNotFoundError(f"no complete shuffle output {pairs['path']!r} under {base} (see `gur catalog`)")
    if pairs is None:
        print("train: no shuffle output mined from this split to take GUR's pairs from (run build-pairs); training "
              "on the documents' title and inverse-cloze pairs alone")  # fmt: skip
        config["gur_share"] = 0.0
        return
    config["gur_pairs"] = pairs["fingerprint"]


def shuffle_of(base, split: dict[str, str]) -> dict[str, str] | None:
    """The newest complete shuffle output whose pairs were mined from `split`, or None."""
    from storage.layout import MANIFEST
    from tasks.evaluate.overlap import mined_from

    if split["stage"] != "split":
        return None
    found: list[tuple[float, str]] = []
    for path in (base / "shuffle").glob(f"*/{MANIFEST}"):
        ref = stage_ref("shuffle", path.parent.name)
        if ref_complete(base, ref) and mined_from(base, ref) == split:
            found.append((float(ref_manifest(base, ref).get("finished_at", 0.0)), ref["fingerprint"]))
    return stage_ref("shuffle", max(found)[1]) if found else None


def resolve_config(
    method: str,
    preset: str | None,
    steps: int | None,
    pooling: str | None,
    lr: float | None,
    init_from: str,
    objective: str,
    options: dict[str, Any],
) -> dict[str, Any]:
    """TrainConfig fields: GUR's defaults, or a question preset (`auto`: cpu, the measured one, on every machine)."""
    if method == "gur":
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, not {objective!r}")
        given = {"pooling": pooling, "lr": lr}
        return {
            "objective": objective,
            "preset": GUR_DEFAULTS["preset"] if preset is None else preset,
            "max_steps": GUR_DEFAULTS["steps"] if steps is None else steps,
            "init_from": init_from,
            **{k: v for k, v in given.items() if v is not None},
            **options,
        }
    import torch

    from models.encoders import minilm_path
    from models.training.presets import question_config, resolve_preset

    name = resolve_preset(preset or "auto", torch.cuda.is_available())
    if preset in (None, "auto"):
        print(f"train: preset {name!r} (auto: the measured recipe on every machine; --preset paper for the paper's)")
    overrides = {"pooling": pooling, "lr": lr, **options}
    if steps:  # a fixed step count instead of the preset's epochs
        overrides.update(max_steps=steps, epochs=0.0)
    config = question_config(method, name, overrides)
    config["init_from"] = init_from or str(minilm_path())
    return config


@flow(name="train", log_prints=True)
@holds_root  # a gc never runs meanwhile (storage/builds_lock.py)
def train_flow(
    shards: dict[str, str] | None = None,
    root: str | None = None,
    method: str = METHODS[0],
    variant: str = "lcs",
    objective: str = OBJECTIVES[0],
    preset: str | None = None,
    steps: int | None = None,
    pooling: str | None = None,
    init_from: str = "",
    lr: float | None = None,
    options: dict[str, Any] | None = None,
    nproc: int = 0,
    keywords: str | None = None,
    texts: str | None = None,
    pairs: dict[str, str] | None = None,
) -> dict[str, str]:
    """Train (or resume, or reuse) a model.

    `method="gur"`: on `shards` (default the newest complete `shuffle` output); preset tiny / small
    (default small), 10,000 steps, cls pooling, lr 1e-4; `variant` names the pair filter the shards
    were built with (`lcs` or `none`). `method="tfcsg"` / `"simcse"`: on the keywords stage
    `keywords` (a fingerprint; default the newest complete one), or for SimCSE a text file
    `texts` (column `options.text_field`), fine-tuning `init_from` (default the shipped MiniLM);
    preset paper / cpu / auto (auto = cpu on every machine; models/training/presets.py); `steps`
    replaces the preset's epochs. `method="documents"`: (query, passage) pairs of long documents from a split
    output `shards` (default the newest complete one) or a sentences Parquet file `texts`, fine-tuning `init_from`
    (default MiniLM), one preset (models/documents/), with GUR's LCS pairs from the shuffle output `pairs` (default
    the newest complete one) as `gur_share` of the batches. `options` sets any other TrainConfig field.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    base, started = data_root(root), time.time()
    config = resolve_config(method, preset, steps, pooling, lr, init_from, objective, dict(options or {}))
    if method == "gur":
        source = shards or latest_ref(base, "shuffle")
    elif method == "documents":
        source = shards or (file_ref(texts) if texts else latest_ref(base, "split"))
        gur_pairs_source(base, config, pairs, source)
    else:
        source = shards or question_source(base, keywords, texts, method)
    labels = {"method": method, "variant": variant if method == "gur" else config["preset"]}
    ref = run_stage(train, base, source=source, config=config, nproc=nproc, labels=labels)
    catalog_at_end(str(base), [r for r in (source, ref) if r["stage"] != "file"])
    publish_train_artifacts(base, ref, since=started)
    return ref
