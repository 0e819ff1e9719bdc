"""The `documents` method's Recipe: a pretrained encoder on (query, passage) pairs of the corpus's long documents
(models/documents/pairs.py), trained with TFCSG's encoder and contrastive pair task."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from models.training.recipe import Recipe, encoder_recipe, in_loop_batches

if TYPE_CHECKING:
    from models.training.config import TrainConfig


def build(cfg: TrainConfig, out: Path, rank: int, world: int, ddp: bool, load_weights: bool) -> Recipe:
    """Documents: a pretrained encoder on (query, passage) pairs of long documents (models/documents/pairs.py),
    TFCSG's encoder and contrastive pair task (`kw`: row i's query finds row i's passage, tau 0.05, passages of
    the same document masked)."""
    from models.documents.pairs import DocumentPairs, DocumentStream
    from models.tfcsg.model import TfcsgLoss, TfcsgModel
    from models.tfcsg.recipe import question_tokenizer

    check_config(cfg)
    tok = question_tokenizer(cfg.init_from, out / "tokenizer", rank, ddp)
    positions = start_positions(cfg.init_from)  # a start model with fewer positions cuts the inputs there
    max_len, passage_len = min(cfg.max_len, positions), min(cfg.passage_len, positions)
    data = DocumentPairs(pair_config(cfg, max_len, passage_len, world), tok)
    clusters_s = group_batches(data, cfg, out, tok, max_len, rank, ddp)
    model = TfcsgModel(
        cfg.init_from,
        pooling=cfg.pooling,
        dropout=cfg.dropout,
        load_weights=load_weights,
        attention_dropout=cfg.attention_dropout,
    )
    teacher = load_teacher(cfg, rank)
    loss = TfcsgLoss(
        model,
        "kw",
        temperature=cfg.temperature,
        negatives="topic-masked",
        teacher=teacher,
        teach_weight=cfg.teach_weight,
        teacher_temperature=cfg.teacher_temperature,
    )
    eval_batches = in_loop_batches(cfg, rank, lambda: data.heldout_batches(cfg.eval_batch, cfg.eval_pairs))
    if teacher is not None:  # after the held-out batches: the in-loop accuracy is the student's alone
        data.set_teacher(teacher)
    counts = data.counts()
    if rank == 0:
        print_data_lines(data, counts, cfg, len(eval_batches), positions, max_len, passage_len)

    return encoder_recipe(
        cfg,
        tok,
        model,
        loss,
        DocumentStream(data, rank, world),
        eval_batches,
        model_config={"init_from": cfg.init_from, "pooling": cfg.pooling, "pair_kinds": cfg.pair_kinds},
        info={"data": counts, "losses": ["kw", "teach"] if teacher else ["kw"], "clusters_s": clusters_s},
    )


def load_teacher(cfg: TrainConfig, rank: int):
    """`teacher`: the frozen encoder whose scores the run distils (models/training/teacher.py), said in a line."""
    if not cfg.teacher:
        return None
    from models.training.teacher import Teacher

    teacher = Teacher.load(cfg.teacher)
    if rank == 0:
        tau = cfg.teacher_temperature or cfg.temperature
        print(f"documents: teacher {teacher.folder.name} ({teacher.num_params() / 1e6:.0f}M parameters, "
              f"{teacher.pooling} pooling) scores each query against the batch's passages: `teach` weight "
              f"{cfg.teach_weight:g}, its cosines over {tau:g}", flush=True)  # fmt: skip
    return teacher


def check_config(cfg: TrainConfig) -> None:
    """What the method needs before anything loads: a start encoder, a split output, a mixing weight in [0, 1]."""
    if not cfg.init_from:
        raise ValueError("method 'documents' fine-tunes a pretrained encoder: set init_from to its folder")
    if not cfg.questions:
        raise ValueError("method 'documents' needs `questions`: a split output folder (the sentences table)")
    if not 0 <= cfg.interpolate <= 1:
        raise ValueError(f"interpolate must be within [0, 1], got {cfg.interpolate}")
    if cfg.teacher and cfg.teach_weight < 0:
        raise ValueError(f"teach_weight must be 0 or more, got {cfg.teach_weight}")


def pair_config(cfg: TrainConfig, max_len: int, passage_len: int, world: int):
    """The pairs' settings from a run's config, the inputs cut to `max_len` / `passage_len` tokens."""
    from models.documents.gur_pairs import structure_steps
    from models.documents.pairs import DocumentPairConfig
    from models.tfcsg.recipe import capped_rows

    return DocumentPairConfig(
        source=cfg.questions,
        kinds=cfg.pair_kinds,
        draw=cfg.pair_draw,
        max_len=max_len,
        passage_len=passage_len,
        batch_size=cfg.batch_size,
        seed=cfg.seed,
        heldout_fraction=cfg.heldout_fraction,
        sampling=cfg.sampling,
        same_page=cfg.same_page,
        gur_shards=cfg.shards if cfg.gur_share > 0 else "",
        gur_share=cfg.gur_share,
        replay_source=cfg.replay_source,
        replay_ratio=cfg.replay_ratio,
        limit_rows=capped_rows(cfg, structure_steps(cfg.max_steps, cfg.gur_share), world),
    )


def group_batches(data, cfg: TrainConfig, out: Path, tok, max_len: int, rank: int, ddp: bool) -> float:
    """Each document's page where the sampling or the masking needs it, then the clusters the batches are filled
    from; returns the clustering's seconds, which grow with the documents the run's steps show (a night's plan
    counts them per step)."""
    if cfg.same_page == "masked" or cfg.sampling == "clustered-pages":
        find_pages(data, Path(cfg.questions), rank)
    clustered = time.time()
    if cfg.sampling in ("clustered", "clustered-pages"):
        cluster_batches(data, cfg, out, tok, max_len, rank, ddp)
    return round(time.time() - clustered, 3)


def print_data_lines(
    data, counts: dict[str, int], cfg: TrainConfig, eval_batches: int, positions: int, max_len: int, passage_len: int
) -> None:
    """Rank 0's lines about what the run trains on: the counts, the cut, the replay and GUR's share."""
    cut = f" (the start model has {positions} positions)" if passage_len < cfg.passage_len else ""
    print(f"{describe(counts, eval_batches, cfg.eval_batch)}; queries cut to {max_len} tokens, passages "
          f"to {passage_len}{cut}", flush=True)  # fmt: skip
    if data.replay:
        print(replay_line(data.replay, cfg.replay_ratio), flush=True)
    if data.gur is not None:
        print(f"documents: {cfg.gur_share:.0%} of the batches GUR's pairs (both sentences cut to {max_len} "
              f"tokens), on top of the structure pairs' epochs", flush=True)  # fmt: skip


def describe(counts: dict[str, int], eval_batches: int, eval_batch: int) -> str:
    """The run's first line about its data."""
    line = (
        f"documents: {counts['train_documents']} to train on, {counts['train_rows']} pairs an epoch "
        f"({counts['with_title']} with a title, {counts['with_ict']} with two sentences or more), "
        f"{counts['heldout_rows']} held out ({eval_batches} batches of {eval_batch}), "
        f"{counts['no_pair']} without a pair"
    )
    if "gur_pairs" in counts:
        line += (
            f"; GUR's pairs: {counts['gur_pairs']} of training documents ({counts['gur_heldout']} held out, "
            f"{counts['gur_unknown']} of documents the split does not hold)"
        )
    return line


def replay_line(counts: dict[str, int], ratio: float) -> str:
    """What a candidate on a grown corpus trains on (models/training/replay.py)."""
    if not counts["new_rows"] and not counts["new_documents"]:
        return (
            f"documents: a seeded sample of {counts['replayed_rows']} of {counts['old_rows']} training rows "
            f"(what the run's steps show): {counts['trained_documents']} documents"
        )
    limit = f"{ratio:g} older per new one" if ratio else "all the older ones"
    line = (
        f"documents: {counts['new_documents']} new or changed since the champion's data first "
        f"({counts['new_trained_documents']} trained), then {counts['replayed_rows']} of {counts['old_rows']} "
        f"older rows ({limit}, within the run's steps): {counts['trained_documents']} documents"
    )
    return line + (f"; {counts['new_left_out']} new rows did not fit" if counts["new_left_out"] else "")


def cluster_batches(data, cfg: TrainConfig, out: Path, tok, max_len: int, rank: int, ddp: bool) -> None:
    """`sampling = "clustered"`: the training documents' clusters by the start model, computed once by rank 0 and
    saved in the run folder (models/documents/clusters.py)."""
    import torch.distributed as dist

    from models.documents.clusters import CLUSTERS_FILE, cluster_documents, document_texts

    docs = data.questions
    documents = np.array(sorted({data.document(int(r)) for r in data.train_rows}), np.int64)
    if rank == 0:
        texts = document_texts(docs.titles, docs.sentences)
        pages = data.pages if cfg.sampling == "clustered-pages" else None
        labels = cluster_documents(out, cfg.init_from, tok, texts, documents, cfg.batch_size, max_len, cfg.seed, pages)
        what = "pages" if pages is not None else "documents"
        print(f"documents: {int(labels.max()) + 1} clusters of the training {what} by the start model", flush=True)
    if ddp:
        dist.barrier()
    if rank != 0:
        labels = np.load(out / CLUSTERS_FILE)
    data.set_clusters(labels)


def find_pages(data, split: Path, rank: int) -> None:
    """Each document's page, from the corpus's own ids (models/documents/pages.py), handed to the pairs."""
    from models.documents.pages import page_numbers, split_source_ids

    pages = page_numbers(data.questions.ids, split_source_ids(split))
    data.set_pages(pages)
    if rank == 0:
        many = int((np.bincount(pages) > 1).sum())
        print(f"documents: {len(data.questions)} sections of {int(pages.max(initial=-1)) + 1} pages ({many} pages of "
              "two sections or more, by their ids' `page#section`)", flush=True)  # fmt: skip


def start_positions(init_from: str) -> int:
    """How many tokens the start encoder takes (its position embeddings; MiniLM 512): the recipe's 256-token
    passages are cut to this for a smaller model."""
    from transformers import AutoConfig

    return int(getattr(AutoConfig.from_pretrained(init_from), "max_position_embeddings", 0) or 1 << 30)
