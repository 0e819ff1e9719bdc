"""`python benchmarks/gpu_suite [options]`: the suite's command (gpu_suite/cli.py)."""

import sys
from pathlib import Path

# Run as a folder, Python puts the package's own folder first on the path, where `cli` or `corpus` would shadow
# any module of that name: the folder above it (benchmarks/) takes its place.
sys.path[0] = str(Path(__file__).resolve().parents[1])

from gpu_suite.cli import main  # noqa: E402

raise SystemExit(main())
