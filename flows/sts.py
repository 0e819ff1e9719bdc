"""The `sts` flow: supervised STS-B, the survey's model families next to ours -> `metrics`, report, chart."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.parameters import missing_sts_default, stsb_file
from storage.builds_lock import holds_root
from storage.layout import data_root
from tasks.runtime.catalog import catalog_at_end
from tasks.runtime.stage_cache import run_stage
from tasks.sts.data import check_holdout
from tasks.sts.families import CPU_TABLE, PAPER_TABLE, PRESETS, parse_family
from tasks.sts.task import StsFiles, publish_sts, sts_report, sts_unit

REPO = Path(__file__).resolve().parents[1]


def _path(path: str) -> str:
    """Relative paths resolve against the repository root (where the deployment runs)."""
    return str((REPO / path).resolve()) if path and not Path(path).is_absolute() else path


def sts_files(lang: str, train: str | None, dev: str | None, test: str | None, holdout: float = 0.0) -> StsFiles:
    """Given files win; otherwise the shared data's `stsb/stsb-<lang>-{train,dev}.csv` (no test: held back),
    an error naming the option when this machine lacks them."""
    if holdout:
        check_holdout(holdout)
    missing = missing_sts_default(lang, train, dev)
    if missing:
        raise FileNotFoundError(missing)
    files = StsFiles(
        lang,
        _path(train or stsb_file(lang, "train")),
        _path(dev or stsb_file(lang, "dev")),
        _path(test or ""),
        float(holdout or 0.0),
    )
    for path in (files.train, *files.splits().values()):
        if not Path(path).is_file():
            raise FileNotFoundError(f"STS file not found: {path}")
    return files


@flow(name="sts", log_prints=True)
@holds_root  # a gc never runs meanwhile (storage/builds_lock.py)
def sts(
    families: list[str] | None = None,
    langs: list[str] | None = None,
    train: str | None = None,
    dev: str | None = None,
    test: str | None = None,
    preset: str = "cpu",
    seeds: list[int] | None = None,
    overrides: dict | None = None,
    holdout: float = 0.0,
    root: str | None = None,
) -> dict:
    """Train and score each family x language x seed (cached units), then the report.

    `families=None`: the preset's table. `train` / `dev` / `test` override the default files (one
    language then). `overrides`: StsTrainConfig fields applied to every trained family (smoke runs).
    `holdout` > 0: train on the rest of the training pairs and score that seeded share too (split
    `<train>-holdoutNN`), to choose settings without looking at dev.
    """
    if preset not in PRESETS:
        raise ValueError(f"unknown sts preset {preset!r}: expected one of {', '.join(PRESETS)}")
    names = list(families or (CPU_TABLE if preset == "cpu" else PAPER_TABLE))
    specs = [parse_family(name).spec for name in names]  # one-line errors before any work
    files = [sts_files(lang, train, dev, test, holdout) for lang in langs or ["en"]]
    base = data_root(root)
    units = [
        run_stage(sts_unit, base, family=spec, files=f, seed=seed, preset=preset, overrides=overrides)
        for f in files
        for spec in specs
        for seed in seeds or [0]
    ]
    report = run_stage(sts_report, base, units=units)
    path = publish_sts(report, str(base))
    catalog_at_end(str(base), [report])
    return {"report": report, "units": units, "path": path}
