"""The suite's fixed places and tables."""

from __future__ import annotations

import harness

RESULTS = harness.RESULTS  # docs/results/: the results log
SUITE = "benchmarks/gpu_suite"  # the command's path, as results and rerun commands name it
PARTS = ("tests", "throughput", "tfcsg", "sbert", "gur-scratch")
START_MODELS = ("minilm", "mpnet")  # the tfcsg part's start encoders, in order
# Dense bf16 peak by device name (the spec sheets' figure without sparsity); any other device: MFU null.
PEAK_TFLOPS = {"H100 80GB HBM3": 989.0, "H100 SXM": 989.0, "H200": 989.0}
HELD_OUT_PERCENT = 20  # documents held out of the pairs by title (tasks.evaluate.data.is_held_out)
