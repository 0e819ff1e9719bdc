"""Small generated inputs the tests and benchmarks share: a tiny random BERT and StackOverflow titles, wiki-like
documents, demo-corpus shards, a seeded synthetic corpus. Seeded; nothing from the network."""
