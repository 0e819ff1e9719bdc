"""`gur gc` and `gur du`: one retention pass over a data root under its locks, and the report of what it holds.

gc holds the nightly lock (no night, promote or rollback meanwhile) and the builds lock exclusively (no
build, training or evaluation meanwhile: storage/builds_lock.py), then plans (tasks/retention/plan.py),
rebuilds the catalog without the outputs that go (so no view ever points at a deleted file, even after a
kill), deletes them (tasks/retention/sweep.py) and refreshes the catalog again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from storage.layout import SPLIT_SOURCE
from tasks.retention.plan import Output, Plan, RetentionConfig, builds_by_corpus, made_from, plan, scan
from tasks.retention.sweep import apply, freed_by_stage, size_by_stage, size_of, targets


@dataclass(frozen=True)
class GcResult:
    plan: Plan
    freed: int  # bytes (what would be freed, on a dry run)
    applied: bool
    by_stage: dict[str, int]


def collect(
    root: Path, config: RetentionConfig, do_apply: bool, wait_s: float = 0.0, holder: str = "gur gc"
) -> GcResult:
    """One pass; a dry run (`do_apply` False) changes nothing but still waits for the locks (a consistent view)."""
    from storage.builds_lock import builds_lock
    from storage.champion import root_lock

    with root_lock(root, holder), builds_lock(root, exclusive=True, wait_s=wait_s, what="run gur gc after it"):
        return collect_locked(root, config, do_apply)


def collect_locked(
    root: Path, config: RetentionConfig, do_apply: bool, pending: dict[str, str] | None = None
) -> GcResult:
    """`collect` for a caller that holds the locks itself (the end of a night: `pending` is its candidate)."""
    from storage.catalog import refresh_catalog

    the_plan = plan(root, config, pending)
    by_stage = freed_by_stage(targets(root, the_plan))  # measured once, before anything goes
    if not do_apply:
        return GcResult(the_plan, sum(by_stage.values()), False, by_stage)
    catalog = (root / "catalog.duckdb").exists()
    if catalog and the_plan.delete:  # first no view reads what goes: a kill from here on leaves none pointing at it
        refresh_catalog(root, without=frozenset(the_plan.delete))
    apply(root, the_plan)
    if catalog or the_plan.delete:
        refresh_catalog(root)
    return GcResult(the_plan, sum(by_stage.values()), True, by_stage)


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def gc_report(result: GcResult) -> str:
    p = result.plan
    verb = "freed" if result.applied else "would free"
    lines = [f"{'stage':<14} {'delete':>7} {'prune':>6} {verb:>12}"]
    stages = sorted({*(k.split("/")[0] for k in p.delete), *(k.split("/")[0] for k in p.prune), *result.by_stage})
    for stage in stages:
        deleted = sum(k.startswith(f"{stage}/") for k in p.delete)
        pruned = sum(k.startswith(f"{stage}/") for k in p.prune)
        lines.append(f"{stage:<14} {deleted:>7} {pruned:>6} {human(result.by_stage.get(stage, 0)):>12}")
    lines.append(f"{'total':<14} {len(p.delete):>7} {len(p.prune):>6} {human(result.freed):>12}")
    if not result.applied:
        lines.append("a dry run: nothing was deleted (gur gc --apply deletes)")
    return "\n".join(lines)


def du_report(root: Path, config: RetentionConfig) -> str:
    """Per stage: outputs, bytes, kept, what gc would free; per corpus: its builds and what they hold; then why
    each kept build or model is kept. A hard-linked file counts once, under the first stage that links it."""
    the_plan = plan(root, config)
    outputs = scan(root)
    freeable = freed_by_stage(targets(root, the_plan))
    stages = sorted({o.stage for o in outputs.values()} | ({"holdout"} if (root / "holdout").is_dir() else set()))
    folders = {
        stage: [o.dir for o in outputs.values() if o.stage == stage]
        or (sorted((root / stage).iterdir()) if stage == "holdout" else [])
        for stage in stages
    }
    held = size_by_stage(folders)
    lines = [f"{root}: {human(size_of([root]))} in all (hard links counted once)", ""]
    lines.append(f"{'stage':<14} {'outputs':>8} {'size':>10} {'kept':>6} {'gc frees':>10}")
    for stage in stages:
        kept = sum(k.startswith(f"{stage}/") for k in the_plan.keep)
        size, frees = human(held[stage]), human(freeable.get(stage, 0))
        lines.append(f"{stage:<14} {len(folders[stage]):>8} {size:>10} {kept:>6} {frees:>10}")
    from storage.catalog import MAIN
    from storage.manifest_index import INDEX

    other = [p for p in (root / "models", root / "catalog.duckdb", root / INDEX, root / MAIN) if p.exists()]
    lines.append(f"{'models, catalog':<14} {'':>8} {human(size_of(other)):>10}")
    lines += corpus_lines(outputs, the_plan)
    lines += ["", "kept, and why (builds, models and splits; their inputs are kept with them):"]
    for path, why in sorted(the_plan.keep.items()):
        if not why.startswith(("input of", "evaluation record")):
            gone = path.startswith("train/") and not (root / path / "export").is_dir()
            lines.append(f"  {path}: {why}{' (its weights were already deleted: its record only)' if gone else ''}")
    return "\n".join(lines)


def corpus_lines(outputs: dict[str, Output], the_plan: Plan) -> list[str]:
    """Per corpus and kind of build (shuffle: build-pairs, keywords: mine-keywords): builds, kept builds, and
    the bytes of everything they were made from, all of them and the kept ones (links once)."""
    lines = ["", "per corpus (a build's size: every output it was made from; outputs shared by builds count once):"]
    lines.append(f"{'corpus':<40} {'build':<9} {'builds':>6} {'kept':>5} {'size':>10} {'kept size':>10}")
    for key, builds in builds_by_corpus(outputs).items():
        kind, corpus = key.split(":", 1)
        kept = [b.path for b in builds if b.path in the_plan.keep]
        size = size_of(outputs[p].dir for p in made_from([b.path for b in builds], outputs))
        kept_size = size_of(outputs[p].dir for p in made_from(kept, outputs))
        name = shown_corpus(corpus)
        name = name if len(name) <= 40 else "..." + name[-37:]
        lines.append(f"{name:<40} {kind:<9} {len(builds):>6} {len(kept):>5} {human(size):>10} {human(kept_size):>10}")
    if len(lines) == 2:
        lines.append("  (no complete build)")
    return lines


def shown_corpus(corpus: str) -> str:
    """A nightly build reads the training share of a held-out split (`<root>/holdout/<fingerprint>/train`):
    name the corpus the split was made from, as its `_source.json` records it."""
    import json

    path = Path(corpus)
    for split in path.parents:
        if split.parent.name == "holdout" and (split / "train") in (path, *path.parents):
            try:
                source = json.loads((split / SPLIT_SOURCE).read_text(encoding="utf-8"))["corpus"]
            except (OSError, ValueError, KeyError, TypeError):
                return corpus
            return f"{source} (training share)"
    return corpus


def summary(result: GcResult) -> str:
    """One line for a decision row."""
    p = result.plan
    return f"deleted {len(p.delete)} outputs, pruned {len(p.prune)} runs: {human(result.freed)} freed"
