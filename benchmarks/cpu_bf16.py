"""Training steps in fp32 against bf16 autocast on the CPU (`dtype: bf16`, models/training/precision.py), side by side.

    .venv/bin/python benchmarks/cpu_bf16.py                      # MiniLM and all-mpnet-base-v2, cross and siamese
    .venv/bin/python benchmarks/cpu_bf16.py --models minilm --steps 20

For each model and family kind, the same seeded batches of 16 STS-B training pairs (the cpu preset's
batch) train once in each precision from the same start, alternating precision per round so that
load from other jobs hits both alike. Printed per row: wall and CPU seconds per step (median after
two warm-up steps), the bf16 speed-up as a ratio of the two (the figure to quote on a loaded
machine), and the first step's loss in each precision (bf16 rounds, so the two differ a little).
all-mpnet-base-v2 rows need `./run.sh mpnet`; without it they are skipped with a line saying so.
Whether the CPU multiplies bf16 in hardware (AMX or AVX-512 BF16) is printed first: without it
torch emulates bf16 and the ratio falls below 1.
"""

from __future__ import annotations

import csv
import statistics
import time
from pathlib import Path

import harness
from harness import shared_data


def build(kind: str, folder: Path):
    from models.sts.pretrained import CrossEncoder, SiameseEncoder

    return CrossEncoder(folder) if kind == "cross" else SiameseEncoder(folder)


def time_step(model, optimizer, batch, dtype: str) -> tuple[float, float, float]:
    """(wall s, CPU s, loss) of one AdamW step on `batch` in `dtype`."""
    import torch

    from models.training.precision import autocast_for

    a, b, target = batch
    model.train()
    wall, cpu = time.perf_counter(), time.process_time()
    with autocast_for(torch.device("cpu"), dtype):
        pred = model(a, b)
    loss = torch.nn.functional.mse_loss(pred.float(), target)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return time.perf_counter() - wall, time.process_time() - cpu, loss.item()


def main() -> None:
    parser = harness.parser(__doc__, "/tmp/gur-bf16", "where all-mpnet-base-v2 is unpacked (once)")
    parser.add_argument("--models", nargs="+", default=["minilm", "mpnet"], choices=["minilm", "mpnet"])
    parser.add_argument("--kinds", nargs="+", default=["cross", "siamese"], choices=["cross", "siamese"])
    parser.add_argument("--steps", type=int, default=12, help="timed steps per precision (after 2 warm-up steps)")
    parser.add_argument("--stsb", default=str(shared_data("stsb", "stsb-en-train.csv")))
    args = parser.parse_args()

    import numpy as np
    import torch

    from models.encoders import minilm_path
    from models.training.precision import cpu_has_bf16_units

    show = harness.Lines()
    show(
        f"CPU multiplies bf16 in hardware (amx_bf16 / avx512_bf16): {cpu_has_bf16_units()}; "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads"
    )
    with open(args.stsb, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    order = np.random.default_rng(0).permutation(len(rows))
    batches = []
    for i in range(args.steps + 2):
        chunk = [rows[j] for j in order[16 * i : 16 * i + 16]]
        target = torch.tensor([float(r[2]) / 5 for r in chunk])
        batches.append(([r[0] for r in chunk], [r[1] for r in chunk], target))

    show(
        "| model | kind | fp32 s/step | bf16 s/step | fp32 CPU s/step | bf16 CPU s/step | speed-up (wall) | "
        "first loss fp32 / bf16 |",
        "|---|---|---|---|---|---|---|---|",
    )
    figures: dict[str, dict] = {}
    for name in args.models:
        if name == "mpnet":
            from tasks.sts.models import mpnet_folder

            try:
                folder = mpnet_folder(harness.workdir(args))
            except FileNotFoundError as err:
                show(f"| mpnet | - | skipped: {err} |")
                continue
        else:
            folder = Path(minilm_path())
        for kind in args.kinds:
            torch.manual_seed(0)
            start = build(kind, folder).state_dict()
            runs = {}
            for dtype in ("fp32", "bf16"):
                model = build(kind, folder)
                model.load_state_dict(start)
                optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=4e-5)
                runs[dtype] = {"model": model, "optimizer": optimizer, "steps": []}
            # alternate the precisions step by step so that other load on the machine hits both alike
            for batch in batches:
                for dtype, run in runs.items():
                    run["steps"].append(time_step(run["model"], run["optimizer"], batch, dtype))
            timed = {d: r["steps"][2:] for d, r in runs.items()}  # after two warm-up steps
            med = {d: tuple(statistics.median(s[i] for s in steps) for i in (0, 1)) for d, steps in timed.items()}
            first = {d: r["steps"][0][2] for d, r in runs.items()}
            wall_s, cpu_s = ({d: m[i] for d, m in med.items()} for i in (0, 1))
            figures[f"{name} {kind}"] = {"s_per_step": wall_s, "cpu_s_per_step": cpu_s, "first_loss": first}
            show(
                f"| {name} | {kind} | {med['fp32'][0]:.2f} | {med['bf16'][0]:.2f} | {med['fp32'][1]:.2f} | "
                f"{med['bf16'][1]:.2f} | {med['fp32'][0] / med['bf16'][0]:.2f}x | "
                f"{first['fp32']:.4f} / {first['bf16']:.4f} |"
            )
    harness.record(
        args, f"fp32 against bf16 training steps on the CPU ({', '.join(args.models)})", show.lines, figures
    )


if __name__ == "__main__":
    main()
