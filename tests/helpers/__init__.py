"""What several test files share: generated corpora, the reference pairing, STS fixtures, a torchrun launcher,
flow-run artifacts, a slowed stage for kill tests, nightly configs, server processes, `gur` as a subprocess,
the demo training shards, hand-written WARC and PDF files, the shared-data check, a trainer stopped mid-run."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the repository
