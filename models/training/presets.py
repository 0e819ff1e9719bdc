"""Training presets of the question methods (TFCSG, SimCSE): the paper's settings and a CPU budget.

- `paper` (Shang et al. §4.3): Adam, lr 3e-5, batch 32, 10 epochs, max length 32, [CLS] pooling, the
  three losses cl + kl + s2s with every in-batch negative. For a GPU: 10 epochs of 16,000 titles are
  5,000 steps.
- `cpu`: what trains on 16,000 titles in under 30 minutes on 2 CPU cores. One epoch at batch 64
  (250 steps), mean pooling (MiniLM was trained with it), and the configuration the rule of
  `benchmarks/quality.py` picked on its dev split (best P@1 within .01 of the start's STS-B): the
  contrastive keyword task (`kw`, each question's positive is its own keyword sequence) plus the
  paper's keyword generation (`s2s`) at weight 8, same-topic negatives masked, and the exported
  weights mixed back toward the start's (`interpolate` 0.75: 0.75 * trained + 0.25 * start), which
  keeps the start's general similarity (STS-B) that the larger s2s weight alone would cost.
  The paper's losses stay one option away (`losses="cl+kl+s2s", s2s_weight=1, interpolate=1`).
Both use tau 0.05 (SimCSE's), no weight decay and no warmup (Adam with a constant rate, as the paper).
SimCSE takes the same preset with `losses="cl"` and every in-batch negative (SimCSE's own recipe).
"""

from __future__ import annotations

from typing import Any

METHODS = ("gur", "tfcsg", "simcse", "documents")  # training recipes (models.training.loop); the first is the default
OBJECTIVES = ("lm+cl", "cl", "lm")  # gur: GUR-FULL, the paper's GUR-LM, GUR-CL; the first is the default
COMMON: dict[str, Any] = dict(
    lr=3e-5,
    max_len=32,
    temperature=0.05,
    weight_decay=0.0,
    warmup_steps=0,
    schedule="constant",
    heldout_fraction=0.05,
    eval_batch=64,
    eval_pairs=1024,
    log_every=10,
)

PRESETS: dict[str, dict[str, Any]] = {
    "paper": dict(
        COMMON,
        batch_size=32,
        epochs=10.0,
        pooling="cls",
        losses="cl+kl+s2s",
        negatives="all",
        eval_every=500,
        ckpt_every=500,
    ),
    "cpu": dict(
        COMMON,
        batch_size=64,
        epochs=1.0,
        pooling="mean",
        losses="kw+s2s",
        s2s_weight=8.0,
        interpolate=0.75,
        negatives="topic-masked",
        eval_every=50,
        ckpt_every=50,
    ),
}
QUESTION_PRESETS = (*PRESETS, "auto")

# The `documents` recipe (models/documents/): one pass over the corpus's documents at batch 32, each giving
# one (query, passage) pair an epoch: its title -> its body where it has a title, else the inverse cloze
# pair (`title-first`); queries of 64 tokens and passages of 256 (the length search embeds), lr 3e-5, mean
# pooling, tau 0.05, batches filled cluster by cluster by the start model from clusters of pages, each page's
# sections spread over its cluster's batches and never each other's negatives (hard in-batch negatives that
# are other pages: models/documents/clusters.py, pages.py), and the export mixed 0.75 toward the start as
# TFCSG's `cpu` preset. Chosen on inner splits of the training sides of the Python documentation and the manual
# pages (benchmarks/recipe_dev.py; the results log: docs/results/, the documents recipe on inner splits). A fifth
# of the batches are GUR's LCS pairs of the night's shuffle output (`gur_share`, models/documents/gur_pairs.py): on
# both inner splits they kept or raised titles, the gate's metric, and raised ICT and the page check, where a third
# lost titles (docs/results/, a fifth and a third of the batches GUR's pairs on the inner splits). No dropout on
# the attention probabilities (the rest keeps MiniLM's 0.1): PyTorch's fused CPU attention kernel then runs and
# keeps no 256 x 256 scores per head, a step in less memory and CPU time than with them
# (benchmarks/train_step_memory.py; docs/results/, the documents trainer's step with and without attention dropout).
DOCUMENT_PRESETS: dict[str, dict[str, Any]] = {
    "cpu": dict(
        COMMON,
        max_len=64,
        passage_len=256,
        pair_kinds="title+ict",
        pair_draw="title-first",
        batch_size=32,
        epochs=1.0,
        pooling="mean",
        losses="kw",
        negatives="topic-masked",
        interpolate=0.75,
        sampling="clustered-pages",
        same_page="masked",
        gur_share=0.2,
        attention_dropout=0.0,
        heldout_fraction=0.02,
        eval_every=50,
        eval_batch=32,
        eval_pairs=128,
        ckpt_every=50,
    ),
}


def resolve_preset(name: str, gpu: bool) -> str:
    """`auto` -> `cpu`, the one recipe that was measured (on a GPU too: `paper` has never been run
    here and stays a choice made by name). `gpu` is kept for when a GPU recipe has been measured."""
    if name not in QUESTION_PRESETS:
        raise ValueError(f"preset {name!r} is not one of {QUESTION_PRESETS} (tiny and small are GUR model sizes)")
    return "cpu" if name == "auto" else name


def question_config(method: str, preset: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """The TrainConfig fields of a TFCSG, SimCSE or documents run: the preset, SimCSE's loss, then the user's own
    values. The documents recipe has one preset, `cpu`, whatever the name asked for."""
    config = dict(DOCUMENT_PRESETS["cpu"] if method == "documents" else PRESETS[preset])
    if method == "simcse":  # SimCSE's own recipe: no keyword tasks, every negative, nothing mixed back
        config.update(losses="cl", negatives="all", interpolate=1.0)
    config.update({k: v for k, v in overrides.items() if v is not None})
    config.update(method=method, preset="cpu" if method == "documents" else preset)
    if method == "simcse" and config["losses"] != "cl":
        raise ValueError(f"simcse trains the `cl` loss alone, not {config['losses']!r} (use method tfcsg)")
    return config
