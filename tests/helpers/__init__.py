"""What several test files share: generated corpora, the reference pairing, STS fixtures, a torchrun launcher,
flow-run artifacts, a slowed stage for kill tests."""
