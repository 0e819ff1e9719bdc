"""The documents recipe's named variants (TrainConfig options over the preset), shared by
benchmarks/recipe_dev.py (which chooses among them on inner splits) and benchmarks/corpus_ladder.py
(`--variants`: rows on a night's own split)."""

from __future__ import annotations

FIRST = {"pair_draw": "coin", "passage_len": 128}  # the first default, which the first variants changed
VARIANTS = {
    "default": {},  # the preset as it is now: title-first, passages of 256 tokens
    "coin": FIRST,
    "each": {**FIRST, "pair_draw": "each"},
    "title": {**FIRST, "pair_kinds": "title"},
    "title-lr6": {**FIRST, "pair_kinds": "title", "lr": 6e-5},  # twice the step size, the same steps
    "title-p256": {**FIRST, "pair_kinds": "title", "passage_len": 256},  # passages as long as search embeds them
    # title-p256 with batches of one cluster each (by the start model): hard in-batch negatives
    "title-p256-clustered": {**FIRST, "pair_kinds": "title", "passage_len": 256, "sampling": "clustered"},
    # the default, a page's other sections no negatives (models/documents/pages.py)
    "masked": {"same_page": "masked"},
    # the default with clusters of pages, each page's sections spread over its cluster's batches, and masked
    "pages": {"same_page": "masked", "sampling": "clustered-pages"},
    "random-masked": {"same_page": "masked", "sampling": "random"},  # random batches, masked
    # the structure pairs of the default and GUR's LCS pairs as a share of the batches (models/documents/gur_pairs.py)
    "no-gur": {"gur_share": 0.0},
    "gur-20": {"gur_share": 0.2},
    "gur-33": {"gur_share": 1 / 3},
    "gur-50": {"gur_share": 0.5},
}
# GUR's own recipe on the night's pairs from the start model, as `method = "gur"` nights train it (15 minutes):
# the span-infilling LM with the contrastive task, or the contrastive task alone: does the LM add?
GUR_VARIANTS = {"gur-night": "lm+cl", "gur-night-cl": "cl"}
