"""One command for a short GPU window: the CUDA tests, GUR throughput, TFCSG and S-BERT epoch times, GUR from scratch.

    python benchmarks/gpu_suite                                     # the GPU machine: under 9 minutes
    python benchmarks/gpu_suite --parts tests throughput            # some parts only
    .venv/bin/python benchmarks/gpu_suite --smoke --out /tmp/s      # the same code, tiny sizes, CPU, < 3 min

The run has 520 s and each part a budget (seconds on one H100 / H200; `--budget-scale` multiplies them all;
time a part leaves unused goes to the later ones). A part that would not fit what is left is skipped with
the reason, and so is a row (a kernel combination, a batch size) that would not fit its part's budget; a
watchdog stops a part 15 s past the whole budget. The parts, in order:

1. `tests` (55 s): `python -m pytest -m gpu -p no:xdist` on the test files with `gpu` tests, a subprocess
   (counts from its junit XML). Checks: nothing failed; on a GPU, nothing skipped.
2. `throughput` (145 s): GUR-Small, long bucket, 256 pairs a batch, bf16 autocast, one pass over the 8
   batches to warm up, 30 timed steps, by `train_throughput.measure` (that script's timing function). Of
   the 24 combinations, in order of value: the eager baseline (every row is read against it), sdpa and flex
   with packing and fused head, the same two compiled, eager compiled with fixed shapes (the configuration
   of the 22% MFU figure). MFU against `PEAK_TFLOPS` (dense bf16: H100 SXM and H200 989 TFLOP/s), else
   null. Checks: finite losses; the first batch's eval-mode loss (no dropout) lower after the steps than
   before; every kernel and layout gives the baseline's initial eval-mode loss within 1% (bf16); a compiled
   row's first training loss within 5% of its uncompiled twin's (their dropout draws differ).
3. `tfcsg` (95 s): the default recipe (preset `cpu`) on `benchmarks/quality.py`'s StackOverflow dev split
   (keywords by the product's ingest and keywords stages), from MiniLM and from all-mpnet-base-v2: seconds
   per epoch at the preset batch and at the largest batch of a doubling search (a few steps each, up to the
   first out-of-memory). Steps are the product's (`models.training.loop.train_step` on `models.tfcsg.recipe.build`'
   recipe); a row steps through its epoch until 60% of its share of the part is spent, and extrapolates
   from the steps it timed when the epoch did not end (the row says which). MiniLM's epoch is exported,
   mixed with its start as the preset says, and scored on the dev part by
   `tasks.evaluate.scoring.question_retrieval` (all-mpnet-base-v2's too with `--tfcsg-starts mpnet`, which
   gives it the whole part). Checks: finite losses that fall; P@1 above chance (on the full split also above
   the start's).
4. `sbert` (40 s): `gur sts sbert-mpnet`'s unit (models/sts, tasks/sts, preset `cpu`) on STS-B train, fp32
   (the preset) then bf16: seconds per epoch, a whole epoch when it fits, else extrapolated. Checks: finite
   losses; a fixed set of training pairs' MSE lower after training; after a whole epoch, dev Spearman > .80.
5. `gur-scratch` (185 s): GUR-Small from scratch (sdpa, packing, fused head, bf16) for 2 minutes (less when
   the earlier parts used their whole budgets) on the Python documentation (python3-doc's HTML under
   /usr/share/doc/python3*/html) when installed, else the demo's Wikipedia sample; pairs built by the
   product's four build-pairs stages in the work folder, 20% of the documents held out by title. Held-out
   title and "title: heading" queries against every paragraph (`dense_retrieval`: recall@100, MRR@10) for
   the trained model, its untrained twin (the same initial weights, exported before the first step), BM25
   and MiniLM. Checks: finite losses that fall; retrieval figures within [0, 1]; BM25 and MiniLM above a
   random ranking (the set is answerable).

Results: an entry of the results log (docs/results/index.md), written through benchmarks/harness.py after
each part: `docs/results/<date>-gpu-suite-<HHMMSSZ>.md` (UTC; the header's commit, machine and command, the
table of every figure with the command that reproduces it and every check) and its `.json` (the same with the
device, driver and torch), the table printed; exit status 0 when every part that ran passed its checks.
`--out DIR` writes the two files there instead (a lent machine's `$OUT`: copy them into docs/results/ and run
`python benchmarks/harness.py index`). `--smoke`: the same code on the CPU on tiny sizes (the tiny GUR preset,
a few steps, subsets, the Wikipedia sample's first 24 articles for gur-scratch's pairs, a random tiny BERT in
place of all-mpnet-base-v2; compile, flex and bf16 rows recorded as skipped), written to `--out` or a
temporary folder as `<date>-gpu-suite-smoke-<HHMMSSZ>`, never to docs/results/. docs/gpu.md explains the rows.

The package: `harness.py` (sizes, budgets, the part record, the product's training step, the results' table),
one module per part (`part_tests.py`, `part_throughput.py`, `part_tfcsg.py`, `part_sbert.py`,
`part_scratch.py`), `corpus.py` (GUR's corpus and its held-out retrieval set, read by the product's HTML
reader and built by its section-retrieval rules), `options.py` (the command's options) and `cli.py` (the parts
in order, the watchdog).
Importing the package imports benchmarks/harness.py (the repository and `benchmarks/` on the path, the offline
variables) and sets the suite's own variables below, before torch or transformers load.
"""

from __future__ import annotations

import os

import harness  # benchmarks/harness.py (the suite's own part helpers are gpu_suite.harness)

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The stages called here outside a flow publish their Prefect artifacts only when a server is reachable; without
# this Prefect would start a temporary server for them (about 15 s) in the middle of a timed part.
os.environ.setdefault("PREFECT_SERVER_ALLOW_EPHEMERAL_MODE", "false")
REPO = harness.REPO
