"""What `gur gc` keeps, and why; what it deletes. A pure reading of the data root: nothing is changed here.

Kept (each with its reason):
- the newest `keep_builds` builds of each corpus (a `shuffle` or `keywords` output; the corpus is the path
  its ingest read) and every output they were made from (upstream outputs, per-file ingest units);
- the champion, the `keep_champions` predecessors its history records (so `gur rollback` works that many times
  in a row) and the newest `keep_champions` history entries, and the outputs they were trained on and mixed from;
- the builds the catalog's `main` shows (a rerun that reused an old build made it `main`'s again), and the
  fit the newest keywords build of each corpus and settings warm-started from (its fingerprint names it:
  without it no rerun is a cache hit);
- every training run the nightly never judged (your own `gur train` runs), and the newest `keep_refused`
  refused candidates (or candidates a night failed on after training them);
- every output without a manifest (a run in progress, or one that resumes, with what its `config.json` reads:
  shards, questions, replay source, the model it starts from), and every data-stage output finished after its
  own corpus's newest build (a build that did not finish: its rerun resumes from them, whatever other corpora
  built since), until more than `keep_builds` builds have finished after them (then abandoned: deleted);
  every output with an unreadable manifest, every evaluation and STS output (their metrics are the history),
  the held-out split a kept build reads;
- the embeddings the catalog's view reads (`embed/active.json`) and the model they were made with (`gur
  search` embeds queries with it), the newest `keep_builds` embed outputs and search indexes; the newest
  prepared folder of each STS zoo model (`sts-llm/`).
Deleted:
- whole data-stage outputs (ingest, split, pair, shuffle, keywords), embeddings and indexes, and
  held-out splits no kept output depends on, and abandoned unfinished data-stage outputs;
- prepared STS zoo model folders superseded by a newer one of the same model;
- the weights (`export/`) and `checkpoints/` of refused candidates and of champions older than the window:
  their manifests, metrics and `promotions` rows stay, so the history keeps its numbers;
- `checkpoints/` of every finished run (they only serve resume);
- past the newest `keep_builds` evaluation (and STS) reports, their extras: `report.md` and the charts of
  the report, `queries.parquet` (per-query values, for paired tests) of the units behind it. The rows of
  `metrics` and the manifests stay: the history keeps its numbers, not its pictures.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storage.layout import MANIFEST, recorded_path

DATA_STAGES = ("ingest-file", "ingest", "split", "pair", "shuffle", "keywords")
DERIVED = ("embed", "embed-index", "bm25-index")  # recomputable from kept outputs: the newest and the one in use stay
HEADS = ("shuffle", "keywords")  # a build: what a flow run ends with
NOT_STAGES = {"models", "holdout", "prefect-results", "_tmp"}  # top-level folders that hold no stage outputs
PREPARED = "sts-llm"  # model folders the STS zoo converts once (tasks/sts/models.py): the newest of each stays
TRASH = ".trash"
WEIGHTS = ("export", "checkpoints", "tokenizer", "loss_curve.png")  # what a pruned run loses (the chart: redrawable)
REPORTS = ("evaluate", "sts")  # outputs whose report and charts go past the window; their metrics rows stay
UNIT_EXTRAS = {"eval-unit": "per_query"}  # stage -> manifest key naming a file only paired tests read


@dataclass(frozen=True)
class RetentionConfig:
    keep_builds: int = 7  # newest builds of each corpus
    keep_champions: int = 5  # predecessors of the champion kept for `gur rollback` (the champion always stays)
    keep_refused: int = 1  # newest refused candidates whose weights stay (a night with nothing new reuses it)

    def __post_init__(self) -> None:
        for name in ("keep_builds", "keep_champions", "keep_refused"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a whole number >= 0, not {value!r}")
        if self.keep_builds < 1:
            raise ValueError("keep_builds must be >= 1: the newest build is what the next night reuses")


@dataclass(frozen=True)
class Output:
    stage: str
    fingerprint: str
    dir: Path
    manifest: dict[str, Any] | None  # None: incomplete (in progress, or resumable), or unreadable
    problem: str = ""  # why the manifest could not be read: the output is kept for `gur verify` to name

    @property
    def path(self) -> str:
        return f"{self.stage}/{self.fingerprint}"


@dataclass
class Plan:
    keep: dict[str, str] = field(default_factory=dict)  # output path -> why it is kept
    delete: dict[str, str] = field(default_factory=dict)  # whole outputs (and held-out splits) -> why
    prune: dict[str, tuple[str, ...]] = field(default_factory=dict)  # output path -> sub-folders to delete
    prune_why: dict[str, str] = field(default_factory=dict)
    trash: list[Path] = field(default_factory=list)  # leftovers of an interrupted gc


def scan(root: Path) -> dict[str, Output]:
    """Every stage output folder under the root, complete or not."""
    outputs = {}
    for stage_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        if stage_dir.name in NOT_STAGES or stage_dir.name.startswith("."):
            continue
        for folder in sorted(p for p in stage_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            path = folder / MANIFEST
            manifest, problem = None, ""
            try:
                manifest = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
                if manifest is not None and not isinstance(manifest, dict):
                    manifest, problem = None, f"{path} is not a JSON object"
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                problem = f"{path} is unreadable ({exc})"
            out = Output(stage_dir.name, folder.name, folder, manifest, problem)
            outputs[out.path] = out
    return outputs


def depends_on(out: Output) -> list[str]:
    """The outputs an output was made from: its upstream references and, for a folder ingest, its per-file units."""
    m = out.manifest or {}
    found = [ref["path"] for ref in m.get("upstream") or [] if isinstance(ref, dict) and ref.get("path")]
    found += [f"ingest-file/{f['unit']}" for f in m.get("corpus_files") or [] if f.get("unit")]
    return found


def corpus_of(path: str, outputs: dict[str, Output], seen: frozenset = frozenset()) -> str:
    """The corpus a build read: its ingest's input path (or name), found through the upstream chain."""
    out = outputs.get(path)
    if out is None or path in seen:
        return "?"
    root = out.dir.parent.parent  # a held-out split's path, recorded before the root moved, is named as it is now
    if out.stage == "ingest":
        inputs = (out.manifest or {}).get("inputs") or {}
        return recorded_path(root, inputs.get("path")) or str(inputs.get("name") or "?")
    for up in depends_on(out):
        if up.startswith(("ingest/", "split/", "pair/")) and up in outputs:
            return corpus_of(up, outputs, seen | {path})
    return recorded_path(root, (out.manifest or {}).get("corpus")) or "?"  # keywords record it


def last_touched(folder: Path) -> float:
    """The newest modification time of `folder` and of what it holds directly (an unfinished output's work)."""
    times = [folder.stat().st_mtime]
    for entry in os.scandir(folder):
        try:
            times.append(entry.stat(follow_symlinks=False).st_mtime)
        except OSError:
            continue
    return max(times)


def builds_by_corpus(outputs: dict[str, Output]) -> dict[str, list[Output]]:
    """`<head stage>:<corpus>` -> its complete builds, newest first."""
    found: dict[str, list[Output]] = {}
    for out in outputs.values():
        if out.stage in HEADS and out.manifest and (corpus := corpus_of(out.path, outputs)) != "?":
            found.setdefault(f"{out.stage}:{corpus}", []).append(out)  # "?": its inputs are gone, no build
    for builds in found.values():
        builds.sort(key=lambda o: o.manifest.get("finished_at", 0), reverse=True)
    return dict(sorted(found.items()))


def made_from(paths: list[str], outputs: dict[str, Output]) -> set[str]:
    """`paths` and every output they were made from (upstream outputs, per-file ingest units)."""
    found, stack = set(), list(paths)
    while stack:
        path = stack.pop()
        if path in found or path not in outputs:
            continue
        found.add(path)
        stack += depends_on(outputs[path])
    return found


def train_dir_of(export: str, root: Path) -> str | None:
    """`train/<fp>` of an export folder under this root (where it was when the root was elsewhere, too), else
    None."""
    path = Path(recorded_path(root, export))
    try:
        rel = path.relative_to(root)
    except ValueError:
        return None
    return f"{rel.parts[0]}/{rel.parts[1]}" if len(rel.parts) == 3 and rel.parts[0] == "train" else None


def output_of(path: str, root: Path) -> str | None:
    """`<stage>/<fingerprint>` of a path inside a stage output of this root (a folder, a file, an export), else
    None. A relative path is a record's, relative to the root."""
    if not path:
        return None
    try:
        parts = Path(recorded_path(root, path)).resolve().relative_to(Path(root).resolve()).parts
    except ValueError:
        return None
    return f"{parts[0]}/{parts[1]}" if len(parts) >= 2 and parts[0] not in NOT_STAGES else None


def run_inputs(run_dir: Path, root: Path) -> dict[str, str]:
    """What an interrupted training run reads when it resumes (its `config.json`): setting -> output."""
    try:
        config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    keys = ("shards", "questions", "replay_source", "init_from")
    found = {key: output_of(str(config.get(key) or ""), root) for key in keys if isinstance(config, dict)}
    return {key: path for key, path in found.items() if path}


def unfinished_builds(
    outputs: dict[str, Output], by_corpus: dict[str, list[Output]], keep_builds: int
) -> tuple[set[str], set[str]]:
    """(finished data-stage outputs that are part of a build that did not finish, unfinished data-stage outputs
    that were abandoned).

    A build that was killed or failed leaves finished outputs newer than its corpus's newest build and one
    unfinished output; its rerun resumes from them, whatever other corpora built since. Both stay until more
    than `keep_builds` builds (of any corpus) have finished after them: a corpus that never builds again, or a
    rerun with other settings, does not keep them forever. A per-file ingest unit belongs to the folders of its
    source name (part of an unfinished build while newer than all their builds); one no folder build has named
    yet belongs to a corpus never built."""
    import bisect

    times: dict[str, float] = {}
    for key, builds in by_corpus.items():
        corpus = key.split(":", 1)[1]
        times[corpus] = max(times.get(corpus, 0), builds[0].manifest.get("finished_at", 0))
    finished = sorted(o.manifest.get("finished_at", 0) for o in outputs.values() if o.stage in HEADS and o.manifest)

    def built_since(t: float) -> int:
        return len(finished) - bisect.bisect_right(finished, t)

    folders: dict[str, set[str]] = {}  # source name -> corpora (folder ingests)
    for out in outputs.values():
        inputs = (out.manifest or {}).get("inputs") or {}
        if out.stage == "ingest" and inputs.get("kind") == "folder":
            path = recorded_path(out.dir.parent.parent, inputs.get("path"))
            folders.setdefault(str(inputs.get("source")), set()).add(path)
    pending, abandoned = set(), set()
    for out in outputs.values():
        if out.stage not in DATA_STAGES or out.problem:
            continue
        if out.manifest is None:
            if built_since(last_touched(out.dir)) > keep_builds:
                abandoned.add(out.path)
            continue
        if out.stage == "ingest-file":
            owners = folders.get(str((out.manifest.get("inputs") or {}).get("source")), set()) or {"?"}
        else:
            owners = {corpus_of(out.path, outputs)}
        # after the newest build of every folder it could be part of: a stale folder of the same name (moved,
        # or another project's) must not keep every newer unit
        done = out.manifest.get("finished_at", 0)
        if done > max(times.get(c, 0) for c in owners) and built_since(done) <= keep_builds:
            pending.add(out.path)
    return pending, abandoned


def judged_candidates(root: Path) -> list[tuple[float, str, str]]:
    """(time, decision, train output) of every candidate a night promoted, refused, or trained and then failed
    on (its evaluation stopped the night), oldest first."""
    from storage.shards import read_shard

    folder = root / "models" / "promotions"
    rows = []
    for part in sorted(folder.glob("part-*.parquet")):
        for row in read_shard(part, ["created_at", "decision", "candidate"]).to_pylist():
            train = train_dir_of(row["candidate"] or "", root)
            if train and row["decision"] in ("promoted", "refused", "failed"):
                rows.append((row["created_at"].timestamp(), row["decision"], train))
    return sorted(rows)


def champions(root: Path, keep: int) -> dict[str, str]:
    """Train outputs of the champion, of the `keep` predecessors its history records (the `previous` chain each
    `gur rollback` walks back along: rolled-back entries in between do not use up the window) and of the newest
    `keep` history entries (`gur promote` may name one again) -> why they are kept."""
    from storage.champion import history, read_champion

    kept: dict[str, str] = {}
    current = read_champion(root)
    if current and (train := train_dir_of(current.get("export", ""), root)):
        kept[train] = f"the champion (#{current.get('number')})"
    entries = history(root)
    by_number = {entry.get("number"): entry for entry in entries}
    entry, depth = current, 0
    while entry and entry.get("previous") is not None and depth < keep:
        entry, depth = by_number.get(entry["previous"]), depth + 1
        if entry and (train := train_dir_of(entry.get("export", ""), root)) and train not in kept:
            kept[train] = f"champion #{entry.get('number')}, rollback {depth} back from the champion"
    for entry in entries[::-1][:keep]:
        if (train := train_dir_of(entry.get("export", ""), root)) and train not in kept:
            kept[train] = f"champion history #{entry.get('number')} (rollback)"
    return kept


def slim_records(outputs: dict[str, Output], config: RetentionConfig, result: Plan) -> None:
    """Reports past the newest `keep_builds` of their stage lose `report.md` and charts; the units behind
    them lose their per-query values (a unit no report reads, or one a kept report reads, stays whole)."""
    whole: set[str] = set()
    for stage in REPORTS:
        done = sorted(
            (o for o in outputs.values() if o.stage == stage and o.manifest and not o.manifest.get("pruned")),
            key=lambda o: o.manifest.get("finished_at", 0),
            reverse=True,
        )
        for out in done[config.keep_builds :]:
            names = [out.manifest.get("report"), *(out.manifest.get("charts") or [])]
            subs = tuple(dict.fromkeys(n.split("/")[0] for n in names if n and (out.dir / n).exists()))
            if subs:
                result.prune[out.path] = subs
                result.prune_why[out.path] = f"report and charts of an evaluation past the newest {config.keep_builds}"
        whole.update(o.path for o in done[: config.keep_builds])
    read_by = {up: o.path for o in outputs.values() if o.stage in REPORTS for up in depends_on(o)}
    whole_units = {up for o in whole for up in depends_on(outputs[o])}
    for out in outputs.values():
        key = UNIT_EXTRAS.get(out.stage)
        if not key or not out.manifest or out.path not in read_by or out.path in whole_units:
            continue
        name = out.manifest.get(key)
        if name and (out.dir / name).exists():
            result.prune[out.path] = (name,)
            result.prune_why[out.path] = f"per-query values behind {read_by[out.path]}, a report past the window"


def plan(root: Path, config: RetentionConfig, pending: dict[str, str] | None = None) -> Plan:
    """Mark and sweep: the roots (`build_roots`, `model_roots`, `derived_roots`, `in_use_roots`, `state_roots`:
    what the config and the root's own records say is in use), every output they were made from (`mark`, through
    each manifest's declared inputs), and the rest swept (`sweep`).
    `pending`: export -> decision of a candidate judged but not yet recorded (the night that runs gc)."""
    root = Path(root)
    outputs = scan(root)
    result = Plan(trash=sorted((root / TRASH).iterdir()) if (root / TRASH).is_dir() else [])
    by_corpus = builds_by_corpus(outputs)
    roots, priors = build_roots(by_corpus, config)
    judged_runs = model_roots(root, outputs, config, pending or {}, roots)
    derived_roots(outputs, config, roots)
    in_use_roots(root, outputs, roots)
    pending_builds, abandoned = unfinished_builds(outputs, by_corpus, config.keep_builds)
    state_roots(outputs, pending_builds, abandoned, judged_runs, roots)
    result.keep = mark(roots, outputs, priors)
    sweep(outputs, result, abandoned, config)
    slim_records(outputs, config, result)
    held_out_splits(root, outputs, result)
    return result


def build_roots(by_corpus: dict[str, list[Output]], config: RetentionConfig) -> tuple[dict[str, str], dict[str, str]]:
    """(the newest `keep_builds` builds of each corpus, the fits the keywords builds warm-started from)."""
    roots: dict[str, str] = {}
    priors: dict[str, str] = {}
    for key, builds in by_corpus.items():
        for rank, out in enumerate(builds[: config.keep_builds], 1):
            roots[out.path] = f"newest {out.stage} build #{rank} of {key.split(':', 1)[1]}"
        settings: set[str] = set()
        for out in builds if key.startswith("keywords:") else []:
            if (setting := str(out.manifest.get("settings_key"))) not in settings:
                settings.add(setting)  # its fingerprint names its warm start: a rerun is a cache hit only with it
                if prior := (out.manifest.get("convergence") or {}).get("warm_start_from"):
                    priors[f"keywords/{prior}"] = f"the fit {out.path} warm-started from"
    return roots, priors


def model_roots(
    root: Path, outputs: dict[str, Output], config: RetentionConfig, pending: dict[str, str], roots: dict[str, str]
) -> set[str]:
    """The champion window and the newest `keep_refused` refused candidates into `roots`; returns every training
    run a night judged (a mixed candidate's unmixed run with it)."""
    kept_champions = champions(root, config.keep_champions)
    roots.update(kept_champions)
    judged = judged_candidates(root)
    for export, decision in pending.items():
        if train := train_dir_of(export, root):
            judged.append((float("inf"), decision, train))
    judged_runs = {train for _, _, train in judged}
    for train in list(judged_runs):  # a mixed candidate's unmixed run was judged with it
        out = outputs.get(train)
        if out and out.manifest and (unmixed := out.manifest.get("unmixed")):
            judged_runs.add(unmixed["path"])
    promoted = {train for _, d, train in judged if d == "promoted"}  # a night may fail after promoting
    refused = [t for _, d, t in judged if d in ("refused", "failed") and t not in kept_champions and t not in promoted]
    for train in list(dict.fromkeys(refused[::-1]))[: config.keep_refused]:
        roots.setdefault(train, "a newest refused (or failed-on) candidate (keep_refused)")
    return judged_runs


def newest(outputs: dict[str, Output], stage: str) -> list[Output]:
    """The complete outputs of `stage`, newest first."""
    done = (o for o in outputs.values() if o.stage == stage and o.manifest)
    return sorted(done, key=lambda o: o.manifest.get("finished_at", 0), reverse=True)


def derived_roots(outputs: dict[str, Output], config: RetentionConfig, roots: dict[str, str]) -> None:
    """The newest `keep_builds` outputs of each recomputable stage, and the newest prepared folder of each model."""
    for stage in DERIVED:
        for rank, out in enumerate(newest(outputs, stage)[: config.keep_builds], 1):
            roots[out.path] = f"newest {stage} output #{rank}"
    models: set[str] = set()
    for out in newest(outputs, PREPARED):  # one folder per model: an upgraded package converts again
        name = str((out.manifest.get("config") or {}).get("name", out.fingerprint))
        if name not in models:
            models.add(name)
            roots[out.path] = f"the newest prepared {name} (the STS zoo's model folder)"


def in_use_roots(root: Path, outputs: dict[str, Output], roots: dict[str, str]) -> None:
    """What search and the catalog read now (the active embeddings, their model and index; `main`'s builds),
    and what an interrupted training run reads when it resumes."""
    active = root / "embed" / "active.json"
    if active.exists() and (path := json.loads(active.read_text(encoding="utf-8")).get("path")) in outputs:
        roots[path] = "the embeddings the catalog's view reads (embed/active.json)"
        model = output_of(str(((outputs[path].manifest or {}).get("config") or {}).get("model_path", "")), root)
        if model in outputs:  # `gur search` embeds every query with it
            roots.setdefault(model, "the model the active embeddings were made with (gur search embeds queries)")
        for out in outputs.values():  # rebuilding a large corpus's index takes minutes on one thread
            if out.stage == "embed-index" and out.manifest and path in depends_on(out):
                roots.setdefault(out.path, "a search index of the active embeddings")
    from storage.catalog import main_builds

    for kind, path in main_builds(root, wait_s=30).items():  # a rerun's reused build is `main`'s, however old
        if path in outputs:
            roots.setdefault(path, f"shown in the catalog's `main` ({kind})")
    for out in outputs.values():
        if out.manifest is None and out.stage == "train":  # interrupted: resuming reads these
            for key, path in run_inputs(out.dir, root).items():
                if path in outputs:
                    roots.setdefault(path, f"{key} of {out.path}, a run that resumes")


def state_roots(
    outputs: dict[str, Output], pending: set[str], abandoned: set[str], judged_runs: set[str], roots: dict[str, str]
) -> None:
    """Outputs kept for what they are: damaged, in progress, part of an unfinished build, a run no night judged,
    a record (evaluations and STS: their metrics are the history)."""
    for out in outputs.values():
        if out.problem:
            roots[out.path] = f"damaged, left for you to look at (gur verify): {out.problem}"
        elif out.manifest is None:
            if out.path not in abandoned:
                roots[out.path] = "incomplete: a run in progress, or one that resumes"
        elif out.path in pending:
            roots[out.path] = "finished after its corpus's newest build: part of a build that did not finish"
        elif out.stage == "train" and out.path not in judged_runs:
            roots.setdefault(out.path, "a training run the nightly never judged")
        elif out.stage not in (*DATA_STAGES, *DERIVED, "train", PREPARED):
            roots[out.path] = "evaluation record (metrics are history)"


def mark(roots: dict[str, str], outputs: dict[str, Output], priors: dict[str, str]) -> dict[str, str]:
    """The roots and everything they were made from (each manifest's `upstream`, a folder's per-file units), with
    why; a warm start's prior fit alone (what it was made from is not needed)."""
    stack = list(roots)
    keep = dict(roots)
    while stack:
        current = outputs.get(stack.pop())
        if current is None:
            continue
        for up in depends_on(current):
            if up not in keep and up in outputs:
                keep[up] = f"input of {current.path}"
                stack.append(up)
    for prior, why in priors.items():
        if prior in outputs:
            keep.setdefault(prior, why)
    return keep


def sweep(outputs: dict[str, Output], result: Plan, abandoned: set[str], config: RetentionConfig) -> None:
    """What is not marked: whole outputs deleted, training runs pruned to their records; kept runs lose their
    checkpoints."""
    for out in outputs.values():
        if out.path in result.keep:
            if out.stage == "train" and out.manifest and (out.dir / "checkpoints").exists():
                result.prune[out.path] = ("checkpoints",)
                result.prune_why[out.path] = "a finished run's checkpoints (resume state only)"
        elif out.stage == "train":
            present = tuple(name for name in WEIGHTS if (out.dir / name).exists())
            if present:
                result.prune[out.path] = present
                result.prune_why[out.path] = "weights of a refused candidate or of a champion past the window"
        elif out.path in abandoned:
            result.delete[out.path] = (
                f"unfinished, and more than {config.keep_builds} builds finished since: abandoned"
            )
        elif out.stage in (*DATA_STAGES, *DERIVED):
            result.delete[out.path] = "no kept output depends on it"
        elif out.stage == PREPARED and out.manifest:
            result.delete[out.path] = "superseded by a newer prepared folder of the same model"


def held_out_splits(root: Path, outputs: dict[str, Output], result: Plan) -> None:
    """Held-out splits: kept while a kept ingest reads their training side."""
    read = {
        Path(recorded_path(root, (o.manifest or {}).get("inputs", {}).get("path", "")))
        for path, o in outputs.items()
        if o.stage == "ingest" and path in result.keep
    }
    for split in sorted((root / "holdout").iterdir()) if (root / "holdout").is_dir() else []:
        if any(r == split or split in r.parents for r in read):
            result.keep[f"holdout/{split.name}"] = "the held-out split a kept build reads"
        else:
            result.delete[f"holdout/{split.name}"] = "no kept build reads it"
