"""Part 4, `sbert`: `gur sts sbert-mpnet`'s unit on STS-B train, fp32 then bf16, seconds per epoch."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from gpu_suite.harness import Clock, Ctx, Part, SkipPart, check_losses, free_memory
from gpu_suite.part_tfcsg import mpnet_start


def part_sbert(ctx: Ctx, clock: Clock, part: Part) -> None:
    from models.sts.pretrained import SiameseEncoder
    from models.sts.train import predict, train_order, train_scorer
    from tasks.sts.data import read_sts_csv, sts_metrics
    from tasks.sts.families import parse_family, train_config

    sz, command = ctx.sizes, ctx.command("sbert")
    try:
        folder, name = mpnet_start(ctx)
    except FileNotFoundError as exc:
        raise SkipPart(str(exc)) from None
    preset = train_config(parse_family("sbert-mpnet"), "cpu", seed=0)
    one = dataclasses.replace(preset, epochs=1.0, lr=sz.sts_lr or preset.lr)
    train = read_sts_csv(ctx.args.stsb_train).head(sz.sts_pairs)
    dev = read_sts_csv(ctx.args.stsb_dev).head(sz.sts_pairs)
    fixed = train.head(256)  # their MSE in eval mode before and after training: does it learn?
    epoch_steps = len(train_order(len(train), one))

    def fixed_mse(scorer, dtype: str) -> float:
        return sts_metrics(predict(scorer, fixed.a, fixed.b, preset.eval_batch, dtype=dtype), fixed.score)["mse"]

    losses: dict[str, list[float]] = {}
    verdicts: dict[str, bool | None] = {}
    spearman: dict[str, float] = {}
    for i, dtype in enumerate(("fp32", "bf16")):
        label = f"{name}, {dtype}{' (the preset)' if dtype == preset.dtype else ''}, batch {preset.batch_size}"
        if dtype == "bf16" and ctx.smoke:
            part.skip_row(label, "--smoke: the bf16 row on the GPU only", command)
            continue
        budget = clock.share(0.6 if i == 0 else 1.0)
        t0 = time.perf_counter()
        scorer = SiameseEncoder(folder, max_len=preset.max_len).to(ctx.device)
        load_s = time.perf_counter() - t0
        before = fixed_mse(scorer, dtype)
        warm = train_scorer(
            scorer, train.a, train.b, train.score, dataclasses.replace(one, max_steps=sz.sts_probe_steps, dtype=dtype)
        )
        per_step = (warm[-1]["seconds"] - warm[0]["seconds"]) / max(1, len(warm) - 1)
        steps = min(epoch_steps, int(0.9 * budget.left() / per_step) - 1)
        if steps < 3:
            part.skip_row(label, f"{per_step:.2f} s a step: not 3 steps in {budget.left():.0f} s", command)
            continue
        log = train_scorer(
            scorer, train.a, train.b, train.score, dataclasses.replace(one, max_steps=steps, dtype=dtype)
        )
        after = fixed_mse(scorer, dtype)
        losses[label] = [before, *(r["loss"] for r in warm + log), after]
        verdicts[label] = after < before
        seconds = log[-1]["seconds"]
        whole = steps == epoch_steps
        figures: dict[str, Any] = {
            "epoch_s": round(seconds if whole else seconds / steps * epoch_steps, 2),
            "s_per_step": round(seconds / steps, 4),
            "steps_per_epoch": epoch_steps,
            "pairs": len(train),
            "load_s": round(load_s, 1),
            "train_mse_before": round(before, 5),
            "train_mse_after": round(after, 5),
        }
        if whole:
            pred = predict(scorer, dev.a, dev.b, preset.eval_batch, dtype=dtype)
            figures["dev_spearman"] = spearman[label] = round(sts_metrics(pred, dev.score)["spearman"], 4)
        note = "a whole epoch, timed" if whole else f"extrapolated from {steps} steps"
        note += f" after {len(warm)} warm-up steps; MSE on the first {len(fixed)} training pairs, eval mode"
        if sz.sts_lr:
            note += f"; lr {sz.sts_lr:g} (a random tiny model; the preset's is {preset.lr:g})"
        part.row(label, command, note=note, **figures)
        del scorer
        free_memory()
    check_losses(part, losses, verdicts)
    if sz.min_dev_spearman is None:
        part.notes.append("--smoke: a random model, so no threshold on its dev Spearman")
    elif spearman:
        low = {k: v for k, v in spearman.items() if v <= sz.min_dev_spearman}
        part.check(f"dev Spearman above {sz.min_dev_spearman}", not low, f"{spearman}")
    else:
        part.notes.append("no whole epoch ran: dev Spearman not measured")
