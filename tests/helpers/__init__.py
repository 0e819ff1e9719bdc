"""What several test files share: generated corpora, the reference pairing, STS fixtures, a torchrun launcher,
flow-run artifacts, a slowed stage for kill tests, nightly configs, server processes, `gur` as a subprocess,
the demo training shards, hand-written WARC and PDF files."""
