"""A first night measures before it promises: a few training steps and a few suite documents timed on this machine,
now, with the model the night starts from.

    rates = probed_rates(night, measured_rates(base, method))   # the root's own rates; a probe where it has none
    plan = night_plan(night, inputs, reused, rates)

A root that has trained and scored before plans by its own outputs (tasks/nightly/budget.py: measured_rates).
A first night has none, and the development VM's rates (DEFAULT_RATES) are wrong on a slower machine, a busy
one, or with a larger start model. The probe times what the night's work is made of, a training step of the
documents recipe's shape (forward, backward and an optimizer step over a batch of passages) and the encoding of
suite documents, and scales each default rate by how much slower or faster this machine is than the same probe
with MiniLM on the development VM (`REFERENCE`). It reads no file of the root and writes none; its random draws
(dropout) are made on a forked generator, so the night's training sees the same random state as without it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from models.training.presets import DOCUMENT_PRESETS
from tasks.nightly.budget import Rates
from tasks.nightly.night import Night
from tasks.nightly.recipe import sample_texts

PROBE_STEPS = 2  # timed after one that warms the kernels up
PROBE_DOCS = 64
# The probe's seconds with all-MiniLM-L6-v2 on the development VM's 2 cores, idle, where DEFAULT_RATES were
# measured (docs/results/: the first-night probe's reference): a training step, and one document encoded.
REFERENCE_STEP_S = 7.4
REFERENCE_DOC_S = 0.038
TRAIN_RATES = ("train_step_s",)
ENCODE_RATES = ("train_start_s", "suite_doc_s", "guard_s", "embed_doc_s")  # loading and encoding dominate these


@dataclass(frozen=True)
class Probe:
    step_s: float  # one training step of the documents recipe's shape, the teacher's scoring included
    doc_s: float  # one document encoded (float32, inference)
    teacher_s: float = 0.0  # of `step_s`: the teacher encoding the batch's passages and queries


def probed_rates(night: Night, rates: Rates) -> Rates:
    """`rates` where the root measured them; the others, defaults, scaled by a probe of this machine now.
    `[budget] probe = false` keeps the defaults."""
    missing = [name for name in (*TRAIN_RATES, *ENCODE_RATES) if name not in rates.sources]
    if not missing or not night.cfg.budget.probe:
        return rates
    texts = sample_texts(night.corpus, PROBE_DOCS) or ["a document"]
    options = night.train.options
    probe = run_probe(night.start, texts, int(options.get("threads") or 0), str(options.get("teacher") or ""))
    train, encode = probe.step_s / REFERENCE_STEP_S, probe.doc_s / REFERENCE_DOC_S
    of_it = f" ({probe.teacher_s:.2f} s of it the teacher's scoring)" if probe.teacher_s else ""
    where = f"probed now: {probe.step_s:.2f} s a step{of_it}, {probe.doc_s * 1000:.1f} ms a document"
    scaled = {name: getattr(rates, name) * (train if name in TRAIN_RATES else encode) for name in missing}
    sources = {**rates.sources, **dict.fromkeys(missing, where)}
    return Rates(**{**asdict(rates), **scaled, "sources": sources})


def run_probe(model_dir: str, texts: list[str], threads: int = 0, teacher: str = "") -> Probe:
    """The probe's two timings with the model in `model_dir` on `texts` (repeated to fill a batch); with a
    `teacher` folder, the step includes its encoding of the batch (the passages, and the queries at a quarter
    of their length: the recipe's 64-token queries beside 256-token passages)."""
    import torch  # here, where a first night probes: the flow's module loads without PyTorch
    from transformers import AutoModel, AutoTokenizer

    preset = DOCUMENT_PRESETS["cpu"]
    batch, length = int(preset["batch_size"]), int(preset["passage_len"])
    passages = [texts[i % len(texts)] for i in range(batch)]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    with torch.random.fork_rng(), _threads(threads):
        model = AutoModel.from_pretrained(model_dir)
        length = min(length, int(getattr(model.config, "max_position_embeddings", length)))  # as the trainer cuts
        tokens = tokenizer(passages, truncation=True, max_length=length, padding="max_length", return_tensors="pt")
        step_s = _step_seconds(model, tokens)
        model.eval()
        docs = [texts[i % len(texts)] for i in range(PROBE_DOCS)]
        started = time.perf_counter()
        with torch.inference_mode():
            for start in range(0, len(docs), 32):
                part = tokenizer(
                    docs[start : start + 32], truncation=True, max_length=length, padding=True, return_tensors="pt"
                )
                model(**part)
        doc_s = (time.perf_counter() - started) / len(docs)
        teacher_s = _teacher_seconds(teacher, passages, length) if teacher else 0.0
    return Probe(step_s + teacher_s, doc_s, teacher_s)


def _teacher_seconds(folder: str, passages: list[str], length: int) -> float:
    """Seconds of the teacher's share of a step: its encoding of the batch's passages, and of its queries (a
    quarter of a passage's tokens each), after one warm-up pass."""
    import torch

    from models.training.teacher import Teacher

    teacher = Teacher.load(folder)
    ids, mask = teacher.tokenize(passages, length)
    teacher.embed(ids[:2], mask[:2])
    started = time.perf_counter()
    teacher.embed(ids, mask)
    took = time.perf_counter() - started
    quarter = max(2, ids.shape[1] // 4)
    started = time.perf_counter()
    teacher.embed(ids[:, :quarter].contiguous(), torch.ones_like(ids[:, :quarter]))
    return took + time.perf_counter() - started


def _step_seconds(model, tokens: dict) -> float:
    """Seconds of one contrastive step over the batch against itself (mean pooling, in-batch negatives)."""
    import torch

    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-9)
    took = []
    for _ in range(PROBE_STEPS + 1):
        started = time.perf_counter()
        hidden = model(**tokens).last_hidden_state  # (B, T, H)
        mask = tokens["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)  # (B, H)
        scores = pooled @ pooled.roll(1, 0).T / 0.05  # each passage against a neighbour's, as query and target
        loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(scores)))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        took.append(time.perf_counter() - started)
    return sum(took[1:]) / PROBE_STEPS


class _threads:
    """Torch's intra-op threads set to the trainer's (`[train] options` threads; 0: as they are) for the probe."""

    def __init__(self, n: int) -> None:
        import torch

        self.torch, self.n, self.before = torch, n, torch.get_num_threads()

    def __enter__(self) -> None:
        if self.n:
            self.torch.set_num_threads(self.n)

    def __exit__(self, *exc) -> None:
        self.torch.set_num_threads(self.before)
