"""What the documents recipe's tests build on: a word tokenizer with the call the pairs make, and a split
stage's table written from documents."""

from __future__ import annotations

from pathlib import Path


class WordTokenizer:
    """A whitespace tokenizer with the call the pairs use (ids are stable word numbers, 2 and 3 the ends)."""

    def __init__(self):
        self.vocab: dict[str, int] = {}

    def __call__(self, texts, padding, truncation, max_length, return_tensors):
        import torch

        rows = [[2, *(self.vocab.setdefault(w, len(self.vocab) + 4) for w in t.split())][: max_length - 1] + [3]
                for t in texts]  # fmt: skip
        width = max(map(len, rows))
        ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
        return {"input_ids": ids, "attention_mask": (ids != 0).long()}


def sentences_file(path: Path, docs: list[dict]) -> Path:
    """The split stage's table of `docs` (the documents recipe reads a split output)."""
    import pyarrow.parquet as pq

    from tasks.split.sentences import SplitConfig, split_documents

    table, _ = split_documents(
        [d["id"] for d in docs], [d["title"] for d in docs], [d["text"] for d in docs], SplitConfig()
    )
    pq.write_table(table, path)
    return path
