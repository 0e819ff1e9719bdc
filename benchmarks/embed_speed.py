"""The embed stage's fast path against today's: documents per CPU second and the top-10 results of sample queries.

    .venv/bin/python benchmarks/embed_speed.py --documents /tmp/ladder6/python-docs/data/ingest/80c587a9158a303d
    .venv/bin/python benchmarks/embed_speed.py --documents DIR --variants today,bfloat16-auto --queries 200

`--documents` is an ingest output (a folder with `_manifest.json` and `part-*.parquet`, e.g. the corpus
ladder's whole-corpus documents). It is copied into a scratch root under `--workdir`, and each variant
embeds it cold with the stage itself (`tasks/embed/task.py: embed_stage`, MiniLM by default):

- `today`: the path before this benchmark: float32, batch 64, one process with torch's threads on every
  core (the reference);
- `float32`: float32 at batch 32 (the batch alone), one process;
- `bfloat16`: bfloat16 at batch 32, one process;
- `bfloat16-auto`: the stage's defaults: bfloat16, batch 32, worker processes (one per core when the
  pending documents pay for them, each with its share of the cores).

CPU seconds are this process's and its children's (`resource.getrusage`), so worker processes count.
`--queries` section titles sampled with `--seed` are the queries, each embedded in float32 as `gur search`
embeds them; a variant's top-10 over its vectors is compared with the reference's: the mean share of the
same documents, and the share of queries whose ten are identical in order. Run it alone: a second heavy job
on the machine inflates every CPU figure.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import time
from pathlib import Path

import harness
import numpy as np

VARIANTS = {  # name: (precision, worker processes (0: the stage's choice), batch)
    "today": ("float32", 1, 64),
    "float32": ("float32", 1, 32),
    "bfloat16": ("bfloat16", 1, 32),
    "float32-auto": ("float32", 0, 32),
    "bfloat16-auto": ("bfloat16", 0, 32),
}
DEFAULT_VARIANTS = "today,float32,bfloat16,bfloat16-auto"


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def scratch_root(documents: Path, workdir: Path) -> tuple[Path, dict[str, str]]:
    """A data root holding a copy of the ingest output, so each variant's embed output is cold."""
    from storage.stage_output import stage_ref

    root = workdir / "root"
    target = root / "ingest" / documents.name
    if not (target / "_manifest.json").exists():
        shutil.copytree(documents, target, dirs_exist_ok=True)
    return root, stage_ref("ingest", documents.name)


def read_vectors(root: Path, ref: dict[str, str]) -> tuple[list[str], np.ndarray]:
    import pyarrow.parquet as pq

    ids, rows = [], []
    for part in sorted((root / ref["path"]).glob("part-*.parquet")):
        table = pq.read_table(part, columns=["doc_id", "embedding"])
        ids += table.column("doc_id").to_pylist()
        rows.append(np.stack(table.column("embedding").to_numpy(zero_copy_only=False)))
    return ids, np.concatenate(rows)


def sample_queries(root: Path, ref: dict[str, str], n: int, seed: int) -> list[str]:
    import pyarrow.parquet as pq

    titles = sorted(
        {
            t
            for part in sorted((root / ref["path"]).glob("part-*.parquet"))
            for t in pq.read_table(part, columns=["title"]).column("title").to_pylist()
            if t
        }
    )
    rng = np.random.default_rng(seed)
    return [titles[i] for i in sorted(rng.choice(len(titles), min(n, len(titles)), replace=False))]


def top10(queries: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    return np.argsort(-(queries @ vectors.T), axis=1, kind="stable")[:, :10]


def main() -> None:
    parser = harness.parser(__doc__, workdir_help="the scratch root's folder (its `root/` is emptied first)")
    parser.add_argument("--documents", required=True, type=Path, help="an ingest output folder")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS, help="comma-separated: " + ", ".join(VARIANTS))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch

    from tasks.embed.model_choice import choose_model
    from tasks.embed.task import embed_stage
    from tasks.embed.vectors import EmbedConfig, encode_texts, load_encoder, native_bf16

    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or variants[0] != "today":
        parser.error(f"--variants: {unknown or 'today (the reference) must come first'}; known: {', '.join(VARIANTS)}")
    work = harness.workdir(args)
    shutil.rmtree(work / "root", ignore_errors=True)
    root, documents = scratch_root(args.documents, work)
    chosen = choose_model(root, args.model)
    rows = json.loads((args.documents / "_manifest.json").read_text())["rows"]["documents"]
    shards = len(list(args.documents.glob("part-*.parquet")))
    show = harness.Lines()
    show(
        f"## embed speed: {rows} documents in {shards} shards, {chosen.spec}, {os.cpu_count()} cores, "
        f"{torch.get_num_threads()} torch threads, native bfloat16: {native_bf16()}"
    )
    queries_text = sample_queries(root, documents, args.queries, args.seed)
    queries = encode_texts(load_encoder(chosen.path), queries_text, 64)  # float32, as gur search embeds them
    results: dict[str, dict[str, float]] = {}
    reference = None
    show(
        "| variant | precision | batch | processes | wall s | CPU s | docs/s | docs per CPU s | x today | "
        "top-10 overlap | identical top-10 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    )
    for name in variants:
        precision, workers, batch = VARIANTS[name]
        config = EmbedConfig(chosen.fingerprint, chosen.path, batch_size=batch, precision=precision)
        for old in (root / "embed").glob("*") if (root / "embed").exists() else []:
            shutil.rmtree(old)  # cold: no shard linked from an earlier variant
        wall, cpu = time.perf_counter(), cpu_seconds()
        ref, _ = embed_stage(documents, config, root, workers=workers)
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
        manifest = json.loads((root / ref["path"] / "_manifest.json").read_text())
        _, vectors = read_vectors(root, ref)
        found = top10(queries, vectors)
        if reference is None:
            reference = found
        overlap = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, reference, strict=True)]))
        identical = float(np.mean([np.array_equal(a, b) for a, b in zip(found, reference, strict=True)]))
        per_cpu = rows / cpu
        results[name] = {
            "wall_s": wall,
            "cpu_s": cpu,
            "docs_per_cpu_s": per_cpu,
            "overlap": overlap,
            "identical": identical,
        }
        speedup = per_cpu / results["today"]["docs_per_cpu_s"]
        processes = "1" if workers == 1 else f"auto ({manifest['shard_work']['computed']} shards)"
        show(
            f"| {name} | {precision} | {batch} | {processes} | {wall:.0f} | {cpu:.0f} | {rows / wall:.1f} | "
            f"{per_cpu:.1f} | {speedup:.2f} | {overlap:.4f} | {identical:.3f} |"
        )
    show(f"{len(queries_text)} queries (section titles, seed {args.seed}), top-10 against today's")
    title = f"The embed stage's variants on {rows:,} documents ({chosen.spec})"
    harness.record(args, title, show.lines, {"documents": rows, "queries": len(queries_text), "variants": results})


if __name__ == "__main__":
    main()
