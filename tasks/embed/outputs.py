"""Which `embed` outputs exist, and which one is in use: the pointer `<root>/embed/active.json`.

    set_active(root, ref, model)      # atomically: the catalog's `embeddings` view follows it
    read_active(root)                 # {"path": "embed/<fp>", "model": ..., "model_path": ..., ...}
    find_output(root, model_fp, documents_fp)

The `embeddings` view reads the output the pointer names (storage/catalog.py: POINTED), not the
newest output that writes the table: a `gur embed minilm` for a comparison, or the page embedding
the champion's start model, would otherwise take over the view. The pointer is replaced with one
rename and the catalog rebuilt with another, so a reader sees the old output or the new one, each
complete and never rewritten.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from storage.atomic import atomic_write_json
from storage.catalog_plan import POINTED
from storage.layout import MANIFEST, record_paths, recorded_path, recorded_paths

STAGE = "embed"
ACTIVE = POINTED["embeddings"]


MODEL_PATHS = ("model_path", "spec")  # the model's folder: relative to the root when under it, as every record


def set_active(root: Path, ref: dict[str, str], model: dict[str, Any]) -> dict[str, Any]:
    pointer = {"path": ref["path"], "fingerprint": ref["fingerprint"], **model}
    atomic_write_json(root / ACTIVE, record_paths(root, pointer, MODEL_PATHS), fsync=True)
    return pointer


def read_active(root: Path) -> dict[str, Any] | None:
    """The pointer, its model's folder absolute (where it is now)."""
    path = root / ACTIVE
    if not path.exists():
        return None
    return recorded_paths(root, json.loads(path.read_text(encoding="utf-8")), MODEL_PATHS)


def embed_manifests(root: Path) -> list[dict[str, Any]]:
    """Every complete embed output's manifest, oldest first."""
    found = []
    for path in (root / STAGE).glob(f"*/{MANIFEST}"):
        try:
            found.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return sorted(found, key=lambda m: float(m.get("finished_at", 0.0)))


def find_output(
    root: Path, model_fp: str, documents_fp: str | None = None, unit: str = "documents"
) -> dict[str, Any] | None:
    """The newest complete embed output of the model (over the given documents output, else any), or None."""
    best = None
    for manifest in embed_manifests(root):
        config = manifest.get("config") or {}
        if config.get("model") != model_fp or config.get("unit", "documents") != unit:
            continue
        if documents_fp and manifest["upstream"][0]["fingerprint"] != documents_fp:
            continue
        best = manifest
    return best


def documents_of(root: Path, ref: dict[str, str]) -> dict[str, str]:
    """The `ingest` output upstream of a stage output (shards, keywords, sentences, ...): what embed reads."""
    from storage.stage_output import ref_manifest

    seen = 0
    while ref["stage"] != "ingest":
        upstream = ref_manifest(root, ref).get("upstream") or []
        if not upstream or seen > 10:
            raise FileNotFoundError(f"{ref['path']}: no ingest output upstream of it")
        ref, seen = upstream[0], seen + 1
    return ref


def current_documents(root: Path) -> dict[str, str]:
    """The documents the catalog's `documents` view shows (one build's), else the newest ingest output. A
    nightly root's build reads the training side of its held-out split (`<root>/holdout/...`), which is not
    what a user searches: there the documents the night embedded (the whole corpus) are the answer."""
    from storage.catalog import catalog_files
    from storage.layout import CATALOG
    from storage.stage_output import latest_ref, stage_ref

    found = None
    if (root / CATALOG).exists():
        try:
            globs, _, _ = catalog_files(root, "documents")
            folder = Path(globs[0]).parent
            if folder.parent.name == "ingest" and (folder / MANIFEST).exists():
                found = stage_ref("ingest", folder.name)
        except (KeyError, RuntimeError, OSError):
            pass
    found = found or latest_ref(root, "ingest")
    if _reads_training_side(root, found) and (active := read_active(root)) is not None:
        if (root / active["path"] / MANIFEST).exists():
            return documents_of(root, stage_ref("embed", active["fingerprint"]))
    return found


def _reads_training_side(root: Path, documents: dict[str, str]) -> bool:
    try:
        read = json.loads((root / documents["path"] / MANIFEST).read_text(encoding="utf-8"))["inputs"]["path"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return Path(recorded_path(root, read)).resolve().is_relative_to((root / "holdout").resolve())


def follow_champion(root: Path, embed: bool = False) -> str:
    """After `gur rollback` or `gur promote` (called under the root lock that changed the champion, so no night
    or gc comes between): the embeddings in use (`gur search`, the search page, the `embeddings` view) become
    the champion's own over the same documents when those are still on disk, since a rolled-back model should
    stop serving search at once; else one line says what still serves it. The next night embeds with the
    champion either way (flows/nightly_retrain.py); `embed` (`--embed`) embeds them now instead, under the
    lock: every document, minutes on a CPU for tens of thousands. Never raises: the champion has already
    changed, and a command that did its work must not end in an error over search."""
    from storage.builds_lock import builds_lock

    active = None
    try:
        with builds_lock(root, wait_s=60.0):  # shared, as a flow holds it
            active = read_active(root)
            return _follow(root, active, embed) if active is not None else ""
    except Exception as exc:  # noqa: BLE001 - reported in one line, never raised (see above)
        still = f", still {active.get('path')}" if active else ""
        return f"search: unchanged{still} ({exc}); `gur embed` embeds the documents with the champion"


def _follow(root: Path, active: dict[str, Any], embed: bool) -> str:
    from storage.catalog import refresh_catalog
    from storage.stage_output import stage_ref
    from tasks.embed import index
    from tasks.embed.model_choice import choose_model
    from tasks.embed.task import embed_index, embed_stage
    from tasks.embed.vectors import EmbedConfig, resolve_precision

    documents = documents_of(root, stage_ref(STAGE, active["fingerprint"]))  # raises when they are gone
    chosen = choose_model(root, None)  # the champion
    if active.get("model") == chosen.fingerprint:
        return f"search: uses the champion's embeddings ({active['path']})"
    found = find_output(root, chosen.fingerprint, documents["fingerprint"])
    if found is not None:
        ref, how = stage_ref(STAGE, found["fingerprint"]), "now uses the champion's embeddings"
    elif embed:
        print(f"search: embedding {documents['path']} with the champion ({chosen.path})", flush=True)
        config = EmbedConfig(chosen.fingerprint, chosen.path, precision=resolve_precision("auto"))
        ref, _ = embed_stage(documents, config, root, workers=0)
        how = "embedded the documents with the champion and now uses them"
    else:
        return (
            f"search: still uses the embeddings of {active.get('spec') or active.get('model_path')} "
            f"({active['path']}) until the next night; `gur embed` (or --embed) embeds the documents with the "
            "champion now"
        )
    set_active(root, ref, {"model": chosen.fingerprint, "model_path": chosen.path, "spec": chosen.spec})
    line = f"search: {how} ({ref['path']})"
    # Its HNSW index (above EXACT_MAX vectors), as the embed flow builds it: gc kept only the active one's, and
    # the first query would otherwise build it while holding the search page.
    embed_index.fn(ref, str(root), exact_max=index.EXACT_MAX)
    try:
        refresh_catalog(root)
    except Exception as exc:  # noqa: BLE001 - the pointer switched; the view is rebuilt on demand
        return f"{line}; the catalog's `embeddings` view was not refreshed ({exc}): run `gur catalog --refresh`"
    return line
