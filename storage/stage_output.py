"""The stage contract, written once: fingerprint -> folder -> reuse or rebuild -> manifest -> reference.

    out = StageOutput.open(root, "split", fp)
    if out.complete:
        return out.cached()          # a Prefect `Cached` state carrying the reference
    ...                              # the stage's own work, writing under out.dir
    return out.finish(code_version=..., config=..., rows=..., ...)

`open` reuses a folder only when its manifest exists and every listed file still has its
recorded size; a damaged output (or one `gur verify` marked invalid) is deleted, logged and
rebuilt, and the rebuild is counted in the new manifest. `finish` writes the manifest last,
with every file's size and SHA-256. References are small JSON dicts with relative paths, so
a data root can move; nothing here is ever pickled.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storage.atomic import atomic_write_json
from storage.fingerprint import _plain
from storage.layout import INVALID, MANIFEST, data_root, stage_dir
from storage.manifest import check_files, inventory, is_complete, read_manifest, write_manifest


def stage_ref(stage: str, fingerprint: str) -> dict[str, str]:
    """What a stage task returns: small, JSON-able, no absolute paths (the data root may move)."""
    return {"stage": stage, "fingerprint": fingerprint, "path": f"{stage}/{fingerprint}"}


def ref_dir(root: Path, ref: dict[str, str]) -> Path:
    return stage_dir(root, ref["stage"], ref["fingerprint"])


def ref_complete(root: Path, ref: dict[str, str]) -> bool:
    return is_complete(ref_dir(root, ref))


def ref_manifest(root: Path, ref: dict[str, str]) -> dict[str, Any]:
    manifest = read_manifest(ref_dir(root, ref))
    if manifest is None:
        raise FileNotFoundError(f"stage output is not complete: {ref_dir(root, ref)}")
    return manifest


LATEST_HINTS = {
    "shuffle": " (run `gur demo` or `gur build-pairs CORPUS` first)",
    "keywords": " (run `gur mine-keywords QUESTIONS --text-field FIELD` first, e.g. "
    "`gur mine-keywords questions.tsv --text-field title --title-field ''`)",
}


# The manifest row count that says whether an output holds anything (an empty corpus gives empty shards).
OUTPUT_ROWS = {
    "ingest": "documents",
    "split": "sentences",
    "pair": "pairs",
    "shuffle": "rows_out",
    "keywords": "keywords",
}


def output_rows(manifest: dict[str, Any]) -> int | None:
    """The output's row count (None where the stage has no such count)."""
    key = OUTPUT_ROWS.get(manifest.get("stage", ""))
    rows = manifest.get("rows", {})
    return int(rows[key]) if key in rows else None


def latest_ref(root: Path, stage: str) -> dict[str, str]:
    """The newest complete output of `stage` under the data root (by the manifest's finish time) that
    has rows: a build from an empty folder never becomes the default input of the next step."""
    best: tuple[float, str] | None = None
    empty = 0
    for path in (root / stage).glob(f"*/{MANIFEST}"):
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if output_rows(manifest) == 0:
            empty += 1
            continue
        finished = float(manifest.get("finished_at", 0.0))
        if best is None or finished > best[0]:
            best = (finished, path.parent.name)
    if best is None:
        what = f"no complete {stage!r} output with rows" if empty else f"no complete {stage!r} output"
        raise FileNotFoundError(f"{what} under {root}{LATEST_HINTS.get(stage, '')}")
    return stage_ref(stage, best[1])


@dataclass
class StageOutput:
    """One stage's output folder for one fingerprint (see the module docstring)."""

    root: Path
    stage: str
    fingerprint: str
    complete: bool = False
    exclude: tuple[str, ...] = ()  # top-level names that are working state, not output (not in the inventory)
    rebuilt: list[dict[str, Any]] = field(default_factory=list)  # earlier damaged copies of this output
    started_at: float = field(default_factory=time.time)

    @classmethod
    def open(
        cls, root: str | Path, stage: str, fingerprint: str, exclude: tuple[str, ...] = (), log=None
    ) -> StageOutput:
        """`log`: the caller's logger (Prefect's run logger inside a task run, so the UI shows reuse)."""
        out = cls(data_root(root), stage, fingerprint, exclude=exclude)
        folder, log = out.dir, log or logging.getLogger(__name__)
        manifest = read_manifest(folder)
        invalid = folder / INVALID
        problems = check_files(folder, manifest) if manifest is not None else []
        if invalid.exists():
            marked = json.loads(invalid.read_text(encoding="utf-8"))
            problems, manifest = marked.get("problems", ["marked invalid"]), marked.get("manifest")
        elif manifest is not None and manifest.get("pruned"):  # gur gc deleted its weights: never reuse it
            deleted = ", ".join(manifest["pruned"]["deleted"])
            log.info("%s: output %s had its %s deleted by gur gc; rebuilding it", stage, folder, deleted)
            out.forget_in_catalog(log)
            shutil.rmtree(folder)
            return out
        if manifest is not None and not problems:
            log.info("%s: reusing complete output %s", stage, folder)
            out.complete = True
            return out
        if problems:
            earlier = (manifest or {}).get("rebuilt", [])
            out.rebuilt = [*earlier, {"at": time.time(), "problems": problems[:20], "n_problems": len(problems)}]
            log.warning(
                "%s: output %s is damaged (%s%s); deleting it and rebuilding",
                stage,
                folder,
                "; ".join(problems[:3]),
                f"; {len(problems) - 3} more" if len(problems) > 3 else "",
            )
            if manifest is not None:
                out.forget_in_catalog(log)
            shutil.rmtree(folder)
        return out

    def forget_in_catalog(self, log) -> None:
        """Before a finished output's folder goes to be rebuilt: the catalog stops naming its files first, as gc
        does, so every view reads while it is rebuilt (hours, for a model) and after a kill mid-way."""
        from storage.catalog import CATALOG, refresh_catalog

        if not (self.root / CATALOG).exists():
            return

        try:
            refresh_catalog(self.root, without=frozenset({f"{self.stage}/{self.fingerprint}"}))
        except Exception as exc:  # noqa: BLE001 - the rebuild goes on; the next refresh catches up
            log.warning("catalog not updated before rebuilding %s (%s): run `gur catalog --refresh`", self.dir, exc)

    @property
    def dir(self) -> Path:
        return stage_dir(self.root, self.stage, self.fingerprint)

    @property
    def ref(self) -> dict[str, str]:
        return stage_ref(self.stage, self.fingerprint)

    def cached(self):
        """The reference as a Prefect `Cached` state, so the UI and `task_states` show the reuse."""
        from prefect.states import Completed

        return Completed(data=self.ref, name="Cached", message=f"reused {self.ref['path']}")

    def finish(self, **fields: Any) -> dict[str, str]:
        """Write the manifest (`build_manifest`'s fields, plus the file inventory) last; returns the reference."""
        self.dir.mkdir(parents=True, exist_ok=True)
        manifest = build_manifest(stage=self.stage, fingerprint=self.fingerprint, started_at=self.started_at, **fields)
        manifest["files"] = inventory(self.dir, self.exclude)
        if self.rebuilt:
            manifest["rebuilt"] = self.rebuilt
        write_manifest(self.dir, manifest)
        (self.dir / INVALID).unlink(missing_ok=True)
        return self.ref


def build_manifest(
    *,
    stage: str,
    fingerprint: str,
    code_version: str,
    config: Any,
    inputs: Any,
    upstream: list[dict[str, str]],
    tables: dict[str, str],
    rows: dict[str, int],
    drops: dict[str, int],
    started_at: float,
    timings: dict[str, float] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest schema every stage shares; `tables` maps a catalog view name to a glob."""
    finished = time.time()
    manifest = {
        "stage": stage,
        "fingerprint": fingerprint,
        "code_version": code_version,
        "config": _plain(config),
        "inputs": _plain(inputs),
        "upstream": upstream,
        "tables": tables,
        "rows": rows,
        "drops": {k: v for k, v in sorted(drops.items())},
        "started_at": started_at,
        "finished_at": finished,
        "timings": {"total_s": round(finished - started_at, 3), **(timings or {})},
    }
    if extra:
        manifest.update(extra)
    return manifest


def verify_outputs(root: Path, stage: str | None = None, log=None) -> list[dict[str, Any]]:
    """Check every complete output (of one stage) against its manifest, content hashes included.

    A damaged output is marked invalid (its manifest moves to `_invalid.json`), so readers stop
    using it and the next run that needs it rebuilds it. Returns one row per output checked.
    """
    log = log or logging.getLogger(__name__)
    pattern = f"{stage}/*/{MANIFEST}" if stage else f"*/*/{MANIFEST}"
    rows = []
    for path in sorted(root.glob(pattern)):
        folder = path.parent
        manifest = json.loads(path.read_text(encoding="utf-8"))
        problems = check_files(folder, manifest, hashes=True)
        listed = manifest.get("files")
        status = "damaged" if problems else ("ok" if listed is not None else "unchecked")
        if problems:
            atomic_write_json(folder / INVALID, {"problems": problems, "manifest": manifest})
            path.unlink()
            log.warning("%s: damaged (%s); marked for rebuilding", folder.relative_to(root), "; ".join(problems[:3]))
        size = sum(f["size"] for f in (listed or {}).values())
        rows.append(
            {
                "output": str(folder.relative_to(root)),
                "files": len(listed or {}),
                "bytes": size,
                "status": status,
                "problems": problems,
            }
        )
    return rows
