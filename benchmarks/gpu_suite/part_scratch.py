"""Part 5, `gur-scratch`: GUR-Small from scratch on the domain corpus against its untrained twin, BM25 and MiniLM."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

from gpu_suite.corpus import build_shards, domain_corpus
from gpu_suite.harness import Clock, Ctx, Part, SkipPart, check_losses, free_memory, product_run
from gpu_suite.settings import HELD_OUT_PERCENT


def part_scratch(ctx: Ctx, clock: Clock, part: Part) -> None:
    from models.training.config import TrainConfig
    from tasks.evaluate.models import resolve_model
    from tasks.evaluate.scoring import dense_retrieval

    sz, command = ctx.sizes, ctx.command("gur-scratch")
    t0 = time.perf_counter()
    name, corpus, data = domain_corpus(ctx)
    shards, counts = build_shards(ctx, corpus)
    part.row(
        f"data: {name}",
        command,
        note=f"the product's ingest, split, pair and shuffle stages; {HELD_OUT_PERCENT}% of documents held out",
        **counts,
        queries=len(data.queries),
        paragraphs=len(data.docs),
        build_s=round(time.perf_counter() - t0, 1),
    )
    out = ctx.work / "runs" / f"gur-scratch-{datetime.now(UTC):%Y%m%dT%H%M%S}"
    # a batch's pairs come from distinct documents (PairStream): at most about 40% of them per batch
    cap = 2 ** int(math.log2(max(2, counts["documents_with_pairs"] / 2.5)))
    short, long = (min(b, cap) for b in sz.scratch_batch)
    cfg = TrainConfig(
        out_dir=str(out),
        shards=str(shards),
        preset=sz.gur_preset,
        vocab_size=sz.vocab,
        attention="sdpa",
        packing=True,
        fused_lm_head=True,
        pooling="mean",
        cl_inputs="clean",
        lr=sz.scratch_lr,
        warmup_steps=sz.scratch_warmup,
        short_batch=short,
        long_batch=long,
        heldout_fraction=0.0,
        eval_every=0,
        threads=ctx.args.threads,
        max_steps=10**9,  # the loop stops at the clock; the schedule is constant after warm-up
    )
    t0 = time.perf_counter()
    stepper = product_run(cfg)
    stepper.run.recipe.export(stepper.model, out / "export-untrained")  # the twin: the same init, never trained
    stepper.model.train()
    setup_s = time.perf_counter() - t0
    until = min(time.perf_counter() + sz.scratch_train_s, clock.end - sz.eval_reserve_s)
    if until - time.perf_counter() < 0.25 * sz.scratch_train_s:
        raise SkipPart(f"{until - time.perf_counter():.0f} s left to train after building the data")
    losses, seconds, tokens = stepper.steps(10**9, until=until)
    stepper.run.recipe.export(stepper.model, out / "export")
    n = max(1, len(losses) // 10)
    part.row(
        f"GUR-{sz.gur_preset} from scratch: sdpa, packing, fused head",
        command,
        note=f"batches of {short} short / {long} long pairs, lr {sz.scratch_lr:g}, {sz.scratch_warmup} warm-up steps",
        steps=len(losses),
        train_s=round(seconds, 1),
        tokens_per_s=round(tokens / seconds),
        loss_first=round(sum(losses[:n]) / n, 4),
        loss_last=round(sum(losses[-n:]) / n, 4),
        setup_s=round(setup_s, 1),
    )
    del stepper
    free_memory()
    models = (
        (f"GUR-{sz.gur_preset}, trained {seconds:.0f} s", str(out / "export")),
        (f"GUR-{sz.gur_preset}, its untrained twin", str(out / "export-untrained")),
        ("BM25", "bm25"),
        ("MiniLM", "minilm"),
    )
    scores: dict[str, dict[str, float]] = {}
    last_s = 0.0
    for label, spec in models:
        if 1.5 * last_s > clock.left():
            part.skip_row(label, f"about {last_s:.0f} s to score, {clock.left():.0f} s left of the part", command)
            continue
        t0 = time.perf_counter()
        values = {f"{m.metric}_at_{m.k}": m.value for m in dense_retrieval(resolve_model(spec), data)}
        scores[label] = values
        last_s = time.perf_counter() - t0
        part.row(label, command, **{k: round(v, 4) for k, v in values.items()}, eval_s=round(last_s, 1))
    check_losses(part, {"GUR from scratch": losses})
    bad = {k: v for k, v in scores.items() if not all(math.isfinite(x) and 0 <= x <= 1 for x in v.values())}
    part.check("retrieval figures finite, within [0, 1]", not bad, f"off: {bad}" if bad else f"{len(scores)} models")
    chance = min(1.0, 100 / len(data.docs))  # a random ranking's recall@100: each relevant paragraph's odds
    low = {
        k: v["recall_at_100"] for k, v in scores.items() if k in ("BM25", "MiniLM") and v["recall_at_100"] <= chance
    }
    part.check("BM25's and MiniLM's recall@100 above a random ranking's", not low, f"chance {chance:.4f}; low: {low}")
    if all(label in scores for label, _ in models[:2]):
        trained, twin = (scores[label]["mrr_at_10"] for label, _ in models[:2])
        part.notes.append(f"trained MRR@10 {trained:.4f}, its untrained twin's {twin:.4f} (a figure, not a check)")
