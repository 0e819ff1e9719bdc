"""How much of a training input is new since an earlier one, counted as the recipe marks it: what the night's
plan sizes a replay run by (tasks/nightly/budget.py), before the trainer reads the rows itself
(models/training/replay.py). The readers are imported where a count is made: they bring PyTorch, which a night
that counts nothing (a first night, an epoch that fits) never needs before its training."""

from __future__ import annotations


def count_new(method: str, now: str, before: str) -> tuple[int, int]:
    """(rows new or changed since `before`, rows) of a training input, as the recipe marks them: documents (a
    split output) by their content digest, TFCSG questions (a keywords output) by their key. What the night's
    plan sizes a replay run by, before the trainer reads the rows itself."""
    if method == "documents":
        from models.documents.pairs import load_documents
        from models.training.replay import content_digests

        docs, earlier = load_documents(now), load_documents(before)
        old = content_digests(earlier.ids, earlier.titles, earlier.sentences)
        digests = content_digests(docs.ids, docs.titles, docs.sentences)
        return sum(old.get(i) != d for i, d in digests.items()), len(digests)
    from models.tfcsg.question_data import load_questions

    keys, old_keys = load_questions(now).keys, set(load_questions(before).keys)
    return sum(k not in old_keys for k in keys), len(keys)
