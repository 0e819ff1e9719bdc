"""The `tfcsg` and `simcse` methods' Recipe: a pretrained encoder on questions and their keyword sequences
(models/tfcsg/model.py), with the warm start's own tokenizer."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from models.training.recipe import Recipe, encoder_recipe, in_loop_batches
from storage.atomic import atomic_path

if TYPE_CHECKING:
    from models.training.config import TrainConfig


def check_question_options(cfg: TrainConfig) -> tuple[str, ...]:
    """The losses of a `tfcsg` / `simcse` run, after the checks that make a bad config one line."""
    from models.tfcsg.model import parse_losses

    if not cfg.init_from:
        raise ValueError(f"method {cfg.method!r} fine-tunes a pretrained encoder: set init_from to its folder")
    if not cfg.questions:
        raise ValueError(f"method {cfg.method!r} needs `questions`: a keywords stage folder or a text file")
    losses = parse_losses(cfg.losses)
    if cfg.method == "simcse" and losses != ("cl",):
        raise ValueError(f"simcse trains the `cl` loss alone, not {cfg.losses!r} (use method tfcsg)")
    if cfg.sim_anchor_weight < 0 or cfg.l2sp_weight < 0 or not 0 <= cfg.interpolate <= 1:
        raise ValueError("sim_anchor_weight and l2sp_weight must be >= 0, and interpolate within [0, 1]")
    return losses


def question_tokenizer(init_from: str, tok_dir: Path, rank: int, ddp: bool) -> Any:
    """The warm-start folder's tokenizer, saved once into the run folder (rank 0) and loaded from there."""
    from transformers import AutoTokenizer

    if rank == 0 and not (tok_dir / "tokenizer_config.json").exists():
        with atomic_path(tok_dir) as tmp:
            AutoTokenizer.from_pretrained(init_from).save_pretrained(str(tmp))
    if ddp:
        dist.barrier()
    return AutoTokenizer.from_pretrained(str(tok_dir))


def question_config(cfg: TrainConfig, losses: tuple[str, ...], world: int = 1):
    """The question data's settings from a run's config: keyword sequences only for the losses that read them; a
    replay run capped at `max_steps` (no `epochs`) takes the rows those steps show, new ones first."""
    from models.tfcsg.question_data import QuestionConfig

    return QuestionConfig(
        source=cfg.questions,
        text_field=cfg.text_field,
        max_len=cfg.max_len,
        batch_size=cfg.batch_size,
        seed=cfg.seed,
        heldout_fraction=cfg.heldout_fraction,
        need_keywords=bool({"kl", "s2s", "kw"} & set(losses)),
        need_s2s="s2s" in losses,
        sampling=cfg.sampling,
        replay_source=cfg.replay_source,
        replay_ratio=cfg.replay_ratio,
        limit_rows=capped_rows(cfg, cfg.max_steps, world),
    )


def capped_rows(cfg: TrainConfig, steps: int, world: int) -> int:
    """The rows `steps` batches show once, where a replay run or the night's budget (`new_first`) cuts the run to
    a step count rather than its epochs; 0 (no cap) otherwise (models/training/replay.py)."""
    return steps * cfg.batch_size * world if (cfg.replay_source or cfg.new_first) and not cfg.epochs else 0


def question_loss(model, cfg: TrainConfig):
    """TFCSG's losses with the run's weights, temperature and negatives."""
    from models.tfcsg.model import TfcsgLoss

    return TfcsgLoss(
        model,
        cfg.losses,
        temperature=cfg.temperature,
        negatives=cfg.negatives,
        kl_weight=cfg.kl_weight,
        kl_detach_target=cfg.kl_detach_target,
        s2s_weight=cfg.s2s_weight,
        kw_weight=cfg.kw_weight,
        cl_weight=cfg.cl_weight,
        sim_anchor_weight=cfg.sim_anchor_weight,
        l2sp_weight=cfg.l2sp_weight,
    )


def build(cfg: TrainConfig, out: Path, rank: int, world: int, ddp: bool, load_weights: bool) -> Recipe:
    """TFCSG and SimCSE: a pretrained encoder on questions and their keyword sequences (models.tfcsg.model)."""
    from models.tfcsg.model import TfcsgModel
    from models.tfcsg.question_data import QuestionData, QuestionStream

    losses = check_question_options(cfg)
    tok = question_tokenizer(cfg.init_from, out / "tokenizer", rank, ddp)
    data = QuestionData(question_config(cfg, losses, world), tok)
    torch.manual_seed(cfg.seed)  # the same auto-encoder and LM head on every rank
    model = TfcsgModel(
        cfg.init_from,
        pooling=cfg.pooling,
        ae_dim=cfg.ae_dim,
        kl_activation=cfg.kl_activation,
        dropout=cfg.dropout,
        load_weights=load_weights,
        attention_dropout=cfg.attention_dropout,
    )
    loss = question_loss(model, cfg)
    eval_batches = in_loop_batches(cfg, rank, lambda: data.heldout_batches(cfg.eval_batch, cfg.eval_pairs))
    counts = data.counts()
    if rank == 0:
        print(
            f"questions: {counts['train_rows']} to train on, {counts['heldout_rows']} held out "
            f"({len(eval_batches)} batches of {cfg.eval_batch}, chance {1 / cfg.eval_batch:.3f}); truncated to "
            f"{cfg.max_len} tokens: {counts['truncated_questions']} questions, {counts['truncated_keywords']} keyword "
            f"sequences; LM head {'from the checkpoint' if model.lm_head_loaded else 'new, tied to the embeddings'}",
            flush=True,
        )

    return encoder_recipe(
        cfg,
        tok,
        model,
        loss,
        QuestionStream(data, rank, world),
        eval_batches,
        model_config={
            "init_from": cfg.init_from,
            "pooling": cfg.pooling,
            "ae_dim": cfg.ae_dim,
            "kl_activation": cfg.kl_activation,
            "lm_head_loaded": model.lm_head_loaded,
        },
        info={"data": counts, "lm_head_loaded": model.lm_head_loaded, "losses": list(losses)},
    )
