"""Part 2, `throughput`: GUR-Small's tokens/s and MFU per kernel x packing x fused head, compiled and not."""

from __future__ import annotations

import argparse
import shlex
import time

from gpu_suite.harness import Clock, Ctx, Part, check_losses, free_memory
from gpu_suite.settings import PEAK_TFLOPS

THROUGHPUT_ROWS = (
    ("eager", False, False, False, "the baseline: transformers' T5, padded rows, full logits"),
    ("sdpa", True, True, False, "SDPA kernels on packed rows, fused LM head"),
    ("flex", True, True, False, "FlexAttention skipping the blocks outside each sentence"),
    ("sdpa", True, True, True, "the same, torch.compile"),
    ("flex", True, True, True, "the same, torch.compile"),
    ("eager", False, False, True, "torch.compile, fixed shapes: the configuration of the 22% MFU figure"),
)


def peak_tflops(device_name: str) -> float | None:
    return next((peak for key, peak in PEAK_TFLOPS.items() if key in device_name), None)


def throughput_command(ctx: Ctx, attention: str, packing: bool, fused: bool, compiled: bool, peak) -> str:
    sz = ctx.sizes
    words = ["python", "benchmarks/train_throughput.py", "--preset", sz.gur_preset, "--bucket", "long"]
    words += ["--batch", str(sz.gur_batch), "--attention", attention, "--packing", "on" if packing else "off"]
    words += [
        "--fused-head",
        "on" if fused else "off",
        "--steps",
        str(sz.timed_steps),
        "--warmup",
        str(sz.warmup_steps),
    ]
    words += ["--compile"] if compiled else []
    words += ["--peak-tflops", f"{peak:g}"] if peak else []
    if ctx.smoke:
        words += ["--docs", str(sz.demo_docs), "--vocab", str(sz.vocab), "--device", "cpu", "--threads", "1"]
    return shlex.join(words)


def part_throughput(ctx: Ctx, clock: Clock, part: Part) -> None:
    import shutil

    import torch
    import train_throughput as tt

    sz = ctx.sizes
    torch.backends.cuda.matmul.allow_tf32 = True  # as train_throughput.py and the training loop
    peak = peak_tflops(torch.cuda.get_device_name()) if ctx.cuda else None
    part.notes.append(
        f"MFU against {peak:g} TFLOP/s (dense bf16 peak of this device)"
        if peak
        else "MFU null: no dense bf16 peak for this device in PEAK_TFLOPS"
    )
    ns = argparse.Namespace(
        preset=sz.gur_preset,
        objective="lm+cl",
        bucket="long",
        batch=str(sz.gur_batch),
        synthetic=False,
        docs=sz.demo_docs,
        vocab=sz.vocab,
        steps=sz.timed_steps,
        warmup=sz.warmup_steps,
        compile=False,
        fixed_shapes=False,
        pack_len=0,
        peak_tflops=peak or 1.0,
    )
    tok, draws, shards = tt.prepare(ns)
    pair_lists = draws[sz.gur_batch]
    results: dict[tuple, dict] = {}
    step_guess, compile_guess = 1.0, sz.compile_s  # seconds, until measured
    try:
        for attention, packing, fused, compiled, why in THROUGHPUT_ROWS:
            if ctx.args.compiled_only and not compiled:
                continue
            key = (attention, packing, fused, compiled)
            label = f"{attention}, packing {'on' if packing else 'off'}, fused head {'on' if fused else 'off'}, "
            label += "compiled" if compiled else "not compiled"
            command = throughput_command(ctx, attention, packing, fused, compiled, peak)
            if attention == "flex" and not ctx.cuda:
                part.skip_row(label, "no FlexAttention backward on the CPU (torch 2.13)", command)
                continue
            if compiled and ctx.smoke:
                part.skip_row(
                    label, "--smoke: torch.compile only on the GPU (inductor takes minutes on 2 cores)", command
                )
                continue
            compiling = compile_guess if compiled else compile_guess / 2 if attention == "flex" else 0.0
            estimate = 5 + compiling + (sz.warmup_steps + sz.timed_steps) * step_guess  # flex compiles its kernel
            if estimate > clock.left():
                part.skip_row(label, f"needs about {estimate:.0f} s, {clock.left():.0f} s left of the part", command)
                continue
            t0 = time.perf_counter()
            try:
                args = argparse.Namespace(**{**vars(ns), "compile": compiled})
                r = tt.measure(args, ctx.device, tok, pair_lists, attention, packing, fused, shards)
            except Exception as exc:  # one combination failing (a compile error, out of memory) is a finding
                part.skip_row(label, f"{type(exc).__name__}: {str(exc)[:300]}", command, "error")
                results[key] = {"error": str(exc)}
                free_memory()
                continue
            wall = time.perf_counter() - t0
            timed = r["step_ms"] / 1000 * sz.timed_steps
            step_guess = max([r["step_ms"] / 1000, *(x["step_ms"] / 1000 for x in results.values() if "step_ms" in x)])
            if compiled:
                compile_guess = 1.2 * (wall - timed)
            results[key] = r
            base = results.get(("eager", False, False, False), {})
            row = part.row(
                label,
                command,
                note=why,
                tokens_per_s=r["tokens_per_s"],
                mfu=r["mfu"] if peak else None,
                mfu_shapes=r["mfu_shapes"] if peak else None,
                model_tflops=r["model_tflops"],
                step_ms=r["step_ms"],
                speedup=round(r["tokens_per_s"] / base["tokens_per_s"], 3) if "tokens_per_s" in base else None,
                pad_share=r["pad_share"],
                rows_per_batch=r["rows_per_batch"],
                max_mem_gb=r.get("max_mem_gb"),
                setup_s=round(wall - timed, 1),
                loss_init=r["loss_init"],
                loss_final=r["loss_final"],
            )
            row["losses"] = r["losses"]
            free_memory()
    finally:
        if shards:
            shutil.rmtree(shards, ignore_errors=True)
    ran = {k: r for k, r in results.items() if "losses" in r}
    if results:
        part.check("every row ran without an error", len(ran) == len(results), f"{len(results) - len(ran)} errors")
    if ran or not results:
        names = {k: f"{k[0]}{' compiled' if k[3] else ''}" for k in ran}
        check_losses(
            part,
            {names[k]: [r["loss_init"], *r["losses"], r["loss_final"]] for k, r in ran.items()},
            {names[k]: r["loss_final"] < r["loss_init"] for k, r in ran.items()},  # the first batch, eval mode
        )
        ref_key = ("eager", False, False, False) if ("eager", False, False, False) in ran else next(iter(ran))
        ref = ran[ref_key]["loss_init"]
        tol = 1e-2 if ctx.cuda else 1e-4
        off = {
            f"{k[0]} packing {k[1]} fused {k[2]} compiled {k[3]}": r["loss_init"]
            for k, r in ran.items()
            if abs(r["loss_init"] - ref) > tol * abs(ref)
        }
        part.check(
            "every kernel and layout gives the baseline's initial loss",
            not off,
            f"reference {ref:.5f} ({ref_key[0]}), relative tolerance {tol:g}; off: {off}",
        )
    pairs = [(k, (*k[:3], False)) for k in ran if k[3] and (*k[:3], False) in ran]
    apart = {
        k[0]: (ran[k]["losses"][0], ran[e]["losses"][0])
        for k, e in pairs
        if abs(ran[k]["losses"][0] - ran[e]["losses"][0]) > 0.05 * abs(ran[e]["losses"][0])
    }
    part.check(
        "compiled and eager mode agree on the first step's loss",
        not apart,
        f"{len(pairs)} pairs compared (5%: their dropout draws differ); apart: {apart}"
        if pairs
        else "no compiled row with its uncompiled twin ran",
    )
