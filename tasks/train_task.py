"""The `train` Prefect task: `shuffle` shards -> a trained GUR model under `<root>/train/<fingerprint>/`.

Training runs in a subprocess (`torchrun` when several GPUs), so a crash or a kill leaves the
checkpoints behind and the next call resumes from the newest one. The output folder holds
`checkpoints/`, `tokenizer/`, `export/` (sentence-transformers folder), `metrics.parquet`,
`loss_curve.png`, `samples.jsonl`, `summary.json` and, last, `_manifest.json`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

from prefect import task

from storage.fingerprint import fingerprint
from storage.layout import MANIFEST, data_root, stage_dir
from storage.manifest import is_complete, write_manifest
from storage.stage_output import build_manifest, ref_dir, ref_manifest, stage_ref
from tasks.progress import current_logger
from tasks.stage_cache import stage_cache_policy

TRAIN_CODE_VERSION = "gur_train_v2"  # v2: warm starts train without the MLP head; step-0 evaluation
REPO = Path(__file__).resolve().parents[1]
RUNTIME_KEYS = ("out_dir", "shards", "threads", "stop_at_step")  # do not change what is learned


def train_config(config: dict[str, Any], out_dir: str = "", shards: str = ""):
    """The full TrainConfig (defaults filled in); unknown keys raise TypeError."""
    from models.train_loop import TrainConfig

    return TrainConfig(out_dir=out_dir, shards=shards, **config)


def train_fingerprint(shards: dict[str, str], config: dict[str, Any]) -> str:
    """hash(shards fingerprint + every learning-relevant TrainConfig field + code version)."""
    full = dataclasses.asdict(train_config(config))
    return fingerprint(
        "train", TRAIN_CODE_VERSION, {k: v for k, v in full.items() if k not in RUNTIME_KEYS}, [shards["fingerprint"]]
    )


def latest_ref(root: Path, stage: str) -> dict[str, str]:
    """The newest complete output of `stage` under the data root (by the manifest's finish time)."""
    best: tuple[float, str] | None = None
    for path in (root / stage).glob(f"*/{MANIFEST}"):
        finished = float(json.loads(path.read_text(encoding="utf-8")).get("finished_at", 0.0))
        if best is None or finished > best[0]:
            best = (finished, path.parent.name)
    if best is None:
        hint = " (run `gur demo` or `gur build-pairs CORPUS` first)" if stage == "shuffle" else ""
        raise FileNotFoundError(f"no complete {stage!r} output under {root}{hint}")
    return stage_ref(stage, best[1])


def launch_command(config_path: Path, nproc: int) -> list[str]:
    """`python -m models.train_loop`, or `torchrun` with `nproc` processes (0: one per GPU)."""
    if nproc == 0:
        import torch

        nproc = torch.cuda.device_count() if torch.cuda.is_available() else 1
    base = ["-m", "models.train_loop", "--config", str(config_path)]
    if nproc <= 1:
        return [sys.executable, *base]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *base]


def run_training(out: Path, cfg_dict: dict[str, Any], nproc: int, logger) -> dict[str, Any]:
    """Write `config.json`, run the loop in a subprocess (resuming from `out/checkpoints`), return the summary."""
    out.mkdir(parents=True, exist_ok=True)
    config_path = out / "config.json"
    tmp = out / f".config-{uuid.uuid4().hex[:8]}.json"
    tmp.write_text(json.dumps(cfg_dict, indent=2) + "\n")
    os.replace(tmp, config_path)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "PYTHONUNBUFFERED": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    cmd = launch_command(config_path, nproc)
    logger.info("train: %s", " ".join(cmd))
    tail: deque[str] = deque(maxlen=40)

    def follow(stream) -> None:
        for line in stream:
            line = line.rstrip()
            if line.startswith(("step ", "resumed", "held-out", "resuming", "stopped")):
                logger.info("train: %s", line)
            tail.append(line)

    with subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        try:
            follow(proc.stdout)
        except KeyboardInterrupt:
            # Ctrl-C reached the trainer too: it finishes its step and saves a checkpoint. Keep
            # reading its output until it has (a second Ctrl-C leaves it to finish on its own).
            logger.warning("train: interrupted; waiting for the trainer to save a checkpoint")
            proc.send_signal(signal.SIGTERM)  # in case the interrupt did not come from a terminal
            follow(proc.stdout)
            proc.wait()
            raise
        code = proc.wait()
    if code != 0:
        raise RuntimeError(
            f"training exited with {code} (rerun to resume from the last checkpoint):\n" + "\n".join(tail)
        )
    return json.loads((out / "summary.json").read_text())


def label_export(folder: Path, labels: dict[str, str], **extra: Any) -> None:
    """Record method, variant and the run's fingerprint in `gur_export.json`, so the `evaluate`
    flow's metrics rows name the model and trace back to this run."""
    path = folder / "gur_export.json"
    if not path.exists():
        return
    info = json.loads(path.read_text(encoding="utf-8"))
    info.update(method=labels.get("method", "gur"), **extra)
    parts = [labels.get("variant", ""), str(extra.get("objective", "")), str(extra.get("train_fingerprint", ""))[:8]]
    info["variant"] = " ".join(filter(None, parts))  # e.g. "lcs lm+cl 0bb5b4bc": two runs never share a name
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


@task(name="train", cache_policy=stage_cache_policy(TRAIN_CODE_VERSION))
def train(
    shards: dict[str, str], config: dict[str, Any], root: str, nproc: int = 0, labels: dict[str, str] | None = None
) -> dict[str, str]:
    """Train on a `shuffle` output; `config`: TrainConfig fields; `labels` (method, variant) go to the manifest."""
    started = time.time()
    base = data_root(root)
    ref_manifest(base, shards)  # raises unless the shards are complete
    fp = train_fingerprint(shards, config)
    out = stage_dir(base, "train", fp)
    logger = current_logger(__name__)
    if is_complete(out):
        logger.info("train: reusing complete output %s", out)
        return stage_ref("train", fp)
    cfg = train_config(config, out_dir=str(out), shards=str(ref_dir(base, shards)))
    summary = run_training(out, dataclasses.asdict(cfg), nproc, logger)
    final = summary.get("final", {})
    label_export(out / "export", labels or {}, objective=cfg.objective, train_fingerprint=fp, step=summary["step"])
    write_manifest(
        out,
        build_manifest(
            stage="train",
            fingerprint=fp,
            code_version=TRAIN_CODE_VERSION,
            config={k: v for k, v in dataclasses.asdict(cfg).items() if k not in RUNTIME_KEYS},
            inputs={"shards": shards["path"]},
            upstream=[shards],
            tables={"train_metrics": "metrics.parquet"},
            rows={"steps": summary["step"], "metrics": len(summary.get("heldout_acc", []))},
            drops={},
            started_at=started,
            extra={
                "labels": labels or {},
                "export": "export",
                "summary": {k: summary.get(k) for k in ("heldout_acc", "chance", "params")},
                "final": final,
            },
        ),
    )
    logger.info("train: done at step %s, held-out accuracy %s", summary["step"], summary.get("heldout_acc"))
    return stage_ref("train", fp)
