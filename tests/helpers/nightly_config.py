"""A night's inputs for the nightly tests: `write_config` writes a nightly TOML (the shipped gate and `cpu`
preset, only the rate, the length and run-time knobs set) and `mixed_folder` writes labelled titles as a
corpus folder of four files in four formats (.tsv, .tsv.gz, .jsonl.bz2, .parquet)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq


def write_config(
    path: Path, corpus: Path, model: Path, lr: float, steps: int = 100, interpolate: float | None = 1.0
) -> Path:
    """The shipped gate (margin 0, 95% paired test) and preset (`cpu`: its losses and weights); only the rate
    (a random tiny BERT needs a large one), the length and run-time knobs are set. No STS guard: the tiny
    model's vocabulary is the titles'. The preset's mix with the start (`interpolate` 0.75) is off unless
    `interpolate=None`: from a random start it puts a quarter of random weights back, which undid most of
    100 steps (+.022 P@1, p = .33: refused), so the nights that must promote train unmixed."""
    mix = "" if interpolate is None else f", interpolate = {interpolate}"
    options = f"{{eval_every = 0, threads = 1, lr = {lr}, ckpt_every = 100{mix}}}"
    path.write_text(
        f"""[corpus]
path = "{corpus}"
text_field = "title"
title_field = ""

[train]
method = "tfcsg"
init_from = "{model}"
preset = "cpu"
steps = {steps}
options = {options}

[keywords]
k = 10

[evaluate]
holdout = 0.3
stsb = []

[gate]
guards = {{}}
""",
        encoding="utf-8",
    )
    return path


def mixed_folder(folder: Path, rows: list[dict]) -> Path:
    """The labelled titles in four files: .tsv, .tsv.gz, .jsonl.bz2 and .parquet, each with `tag` (the
    night's held-out split reads every one as ingest does)."""
    import bz2
    import gzip

    import pyarrow as pa

    folder.mkdir()
    quarter = len(rows) // 4
    parts = [rows[i * quarter : (i + 1) * quarter] for i in range(3)] + [rows[3 * quarter :]]
    tsv = lambda part: "id\ttitle\ttag\n" + "".join(f"{r['id']}\t{r['title']}\t{r['tag']}\n" for r in part)  # noqa: E731
    (folder / "a.tsv").write_text(tsv(parts[0]), encoding="utf-8")
    (folder / "b.tsv.gz").write_bytes(gzip.compress(tsv(parts[1]).encode(), mtime=0))
    lines = "".join(json.dumps({k: r[k] for k in ("id", "title", "tag")}) + "\n" for r in parts[2])
    (folder / "c.jsonl.bz2").write_bytes(bz2.compress(lines.encode()))
    pq.write_table(
        pa.Table.from_pylist([{k: r[k] for k in ("id", "title", "tag")} for r in parts[3]]), folder / "d.parquet"
    )
    return folder


def night_of(cfg, base: Path, suite, started: float | None = None, champion: dict | None = None, corpus=None):
    """A `Night` (tasks/nightly/night.py) as `open_night` would make it, from a loaded config and a suite, for the
    steps tested alone: the corpus as configured unless the training side is given."""
    import time

    from tasks.nightly.night import Night, start_of

    started = time.time() if started is None else started
    corpus = cfg.corpus if corpus is None else corpus
    return Night(cfg, base, "test-night", started, corpus, cfg.train, suite, champion, start_of(cfg, champion))
