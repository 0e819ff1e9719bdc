"""The `embed` flow: a model (default the champion) x the documents in use -> `embeddings`, the view switched.

documents = the catalog's documents (or the ingest output named by fingerprint)
embeddings = embed(documents, model)     # cached per documents shard (ingest unit), model and precision;
                                         # worker processes, or tasks on a Dask cluster (--dask)
embed/active.json -> embeddings          # atomically; the catalog's `embeddings` view follows it
embed-index(embeddings)                  # HNSW, only above EXACT_MAX vectors
"""

from __future__ import annotations

import time
from typing import Any

from prefect import flow

from storage.builds_lock import holds_root
from storage.layout import data_root
from storage.stage_output import ref_manifest, stage_ref
from tasks.embed.model_choice import choose_model
from tasks.embed.outputs import current_documents, set_active
from tasks.embed.task import embed, embed_index
from tasks.embed.vectors import EMBED_BATCH, EmbedConfig, resolve_precision
from tasks.runtime.catalog import catalog_at_end
from tasks.runtime.dask_cluster import dask_scheduler
from tasks.runtime.stage_cache import run_stage


@flow(name="embed", log_prints=True)
@holds_root  # a gc never runs meanwhile (storage/builds_lock.py)
def embed_flow(
    model: str | None = None,
    documents: str | None = None,
    unit: str = "documents",
    batch_size: int = EMBED_BATCH,
    precision: str = "auto",
    workers: int = 0,
    dask: str = "",
    activate: bool = True,
    root: str | None = None,
) -> dict[str, Any]:
    """Embed the documents' title + text with `model` (minilm or a model folder; default: the model in use, the
    champion, else the start model a night recorded, else MiniLM). `documents`: an ingest fingerprint (default:
    the catalog's documents). `unit="sentences"` embeds the build's sentences instead (table
    `sentence_embeddings`). `precision`: float32, bfloat16, or auto (bfloat16 where the hardware computes it).
    `workers`: processes on this machine (0: this one, on every core); `dask`: "local" (a cluster of `workers`
    processes, 0: one per core) or a scheduler address, the same bytes. `activate`: make the output the
    `embeddings` view (documents only), once it is complete. Returns the output's reference and what it did."""
    base, started = data_root(root), time.time()
    chosen = choose_model(base, model)
    upstream = stage_ref("ingest", documents) if documents else current_documents(base)
    if unit == "sentences":
        upstream = sentences_of(base, upstream)
    config = EmbedConfig(
        model=chosen.fingerprint,
        model_path=chosen.path,
        unit=unit,
        batch_size=batch_size,
        precision=resolve_precision(precision),
    )
    print(
        f"embed: {unit} of {upstream['path']} with {chosen.spec} ({chosen.why}, fingerprint {chosen.fingerprint}, "
        f"{config.precision})"
    )
    with dask_scheduler(dask, workers, base) as address:
        ref = run_stage(embed, base, upstream=upstream, config=config, workers=workers, dask=address)
    if activate and unit == "documents":
        set_active(base, ref, {"model": chosen.fingerprint, "model_path": chosen.path, "spec": chosen.spec})
        run_stage(embed_index, base, embeddings=ref)
    catalog_at_end(str(base), [ref])
    return {"embeddings": ref, "model": chosen.path, "why": chosen.why, "note": run_note(base, ref, started)}


def sentences_of(base, documents: dict[str, str]) -> dict[str, str]:
    """The newest complete split output of these documents."""
    import json

    from storage.layout import MANIFEST

    best = None
    for path in (base / "split").glob(f"*/{MANIFEST}"):
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if (manifest.get("upstream") or [{}])[0].get("fingerprint") == documents["fingerprint"]:
            if best is None or manifest["finished_at"] > best["finished_at"]:
                best = manifest
    if best is None:
        raise FileNotFoundError(f"no sentences of {documents['path']}: run gur build-pairs first")
    return stage_ref("split", best["fingerprint"])


def run_note(base, ref: dict[str, str], started: float) -> str:
    """One line: what this run embedded (all, the new shards only, or nothing: the output was complete)."""
    manifest = ref_manifest(base, ref)
    rows = manifest["rows"].get("embeddings", 0)
    if float(manifest.get("finished_at", 0.0)) < started:
        return f"up to date: {rows} embeddings reused ({ref['path']})"
    work, now = manifest.get("shard_work", {}), manifest.get("embedded_now", rows)
    unit = (manifest.get("config") or {}).get("unit", "documents")
    if not work.get("linked"):
        return f"embedded all {rows} {unit} ({work.get('computed', 0)} shards) -> {ref['path']}"
    return (
        f"embedded {now} new {unit} ({work.get('computed', 0)} shards), reused {rows - now} "
        f"({work['linked']} shards) -> {ref['path']}"
    )


def night_embeddings(base, documents: dict[str, str], promoted: bool) -> str:
    """The nightly hook: the model in use (the champion, else the start model) over every document of the corpus,
    held-out ones included (`documents`: an ingest output of the whole folder). After a promotion the new champion
    embeds everything (a new model fingerprint) and the view switches; otherwise only new files' shards are
    embedded. Returns the decision row's `embedded` note; an error is the note, never the night's failure."""
    from tasks.embed.model_choice import model_in_use

    model, what_model = model_in_use(base)
    try:
        result = embed_flow(model=model, documents=documents["fingerprint"], root=str(base))
    except Exception as exc:  # the decision stands; `gur embed` retries
        return f"failed: {type(exc).__name__}: {exc}"[:500]
    what = "re-embedded for the new champion" if promoted else f"{what_model} unchanged"
    return f"{what}: {result['note']}"
