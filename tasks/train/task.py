"""The `train` Prefect task: an input -> a trained encoder under `<root>/train/<fingerprint>/`.

Inputs by method: `gur` trains on a `shuffle` output (sentence pairs); `tfcsg` on a `keywords`
output (questions, GSDMM topics, keyword sequences); `simcse` on a `keywords` output or any
file with a text column (a `file_ref`, keyed by the file's content).

Training runs in a subprocess (`torchrun` when several GPUs), so a crash or a kill leaves the
checkpoints behind and the next call resumes from the newest one. The output folder holds
`checkpoints/`, `tokenizer/`, `export/` (sentence-transformers folder), `metrics.parquet`,
`loss_curve.png`, `samples.jsonl`, `summary.json` and, last, `_manifest.json`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Any

from prefect import task

from models.training.presets import METHODS
from storage.atomic import atomic_write_json, atomic_write_text
from storage.fingerprint import content_signature, fingerprint
from storage.layout import data_root, record_paths
from storage.progress import current_logger
from storage.stage_output import StageOutput, ref_dir, ref_manifest, stage_ref
from tasks.runtime.stage_cache import STAGE_TASK

TRAIN_CODE_VERSION = "train_v3"  # v3: methods tfcsg and simcse; v2: warm starts without the MLP head
REPO = Path(__file__).resolve().parents[2]
# The trainer's lines the task passes to the run's log (the rest: its last 40 kept for an error message):
# progress, and what the run trains on (`questions:`, `documents:`: counts, new-first, GUR's share).
PASSED_ON = ("step ", "resumed", "held-out", "resuming", "stopped", "questions:", "documents:", "epochs")
# Do not change what is learned, so not part of the fingerprint.
# the summary's figures the manifest keeps (retention prunes a judged run to its export and manifest);
# `trained_s`, the step loop's seconds: the night's plan tells a run's start cost from its rate per step;
# `clusters_s`, the documents recipe's clustering of the documents its steps show: it grows with the steps too
SUMMARY_KEYS = ("heldout_acc", "chance", "params", "max_steps", "lm_head_loaded", "trained_s", "clusters_s")
RUNTIME_KEYS = ("out_dir", "shards", "questions", "replay_source", "threads", "stop_at_step", "ckpt_every_s")
# Fields added after runs were made: hashed only when set to something else, so a run made before a
# field existed keeps its fingerprint (and its folder, checkpoints and nightly history).
LATER_FIELDS = {
    "sampling": "random",
    "max_minutes": 0.0,
    "attention": "eager",
    "packing": False,
    "pack_len": 0,
    "fused_lm_head": False,
    "replay_since": "",
    "replay_ratio": 1.0,
    "sim_anchor_weight": 0.0,
    "l2sp_weight": 0.0,
    "interpolate": 1.0,
    "pair_kinds": "title+ict",
    "pair_draw": "coin",
    "passage_len": 128,
    "same_page": "negative",
    "gur_pairs": "",
    "gur_share": 0.0,
    "new_first": False,
    "attention_dropout": None,
    "teacher": "",
    "teach_weight": 1.0,
    "teacher_temperature": 0.0,
}
INPUT_STAGES = {
    "gur": ("shuffle",),
    "tfcsg": ("keywords",),
    "simcse": ("keywords", "file"),
    "documents": ("split", "file"),
}


def train_config(config: dict[str, Any], out_dir: str = "", shards: str = "", questions: str = ""):
    """The full TrainConfig (defaults filled in); unknown keys raise TypeError."""
    from models.training.config import TrainConfig

    return TrainConfig(out_dir=out_dir, shards=shards, questions=questions, **config)


def as_recorded(root: Path, config: dict[str, Any]) -> dict[str, Any]:
    """`config` as the run's fingerprint and manifest name it: a start model under the root (a champion's export)
    relative to the root, so a moved root's runs keep their fingerprints."""
    return record_paths(root, config, ("init_from",))


def train_fingerprint(source: dict[str, str], config: dict[str, Any]) -> str:
    """hash(input fingerprint + every learning-relevant TrainConfig field + code version)."""
    full = dataclasses.asdict(train_config(config))
    hashed = {
        k: v for k, v in full.items() if k not in RUNTIME_KEYS and not (k in LATER_FIELDS and v == LATER_FIELDS[k])
    }
    return fingerprint("train", TRAIN_CODE_VERSION, hashed, [source["fingerprint"]])


def check_fingerprint(value: str | None, option: str = "--keywords") -> str | None:
    """A stage fingerprint as `fingerprint()` writes it (16 hex digits), or None; nothing else: the value
    becomes a path under the data root, so `../x` or `/tmp/x` must never reach it."""
    if value is not None and not re.fullmatch(r"[0-9a-f]{16}", value or ""):
        raise ValueError(f"{option}: {value!r} is not a fingerprint (16 hex digits, as `gur catalog` lists them)")
    return value


def file_ref(path: str | Path) -> dict[str, str]:
    """A plain input file (or folder) as a reference: keyed by its content, so a copy is the same input."""
    path = Path(path).resolve()
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or folder")
    return {"stage": "file", "fingerprint": fingerprint("file", "v1", content_signature(path)), "path": str(path)}


def source_dir(root: Path, ref: dict[str, str]) -> Path:
    """Where an input lives: a file reference's own path, or the stage folder (which must be complete)."""
    if ref["stage"] == "file":
        return Path(ref["path"])
    ref_manifest(root, ref)  # raises unless the stage output is complete
    return ref_dir(root, ref)


def launch_command(config_path: Path, nproc: int) -> list[str]:
    """`python -m models.training.loop`, or `torchrun` with `nproc` processes (0: one per GPU)."""
    if nproc == 0:
        import torch

        nproc = torch.cuda.device_count() if torch.cuda.is_available() else 1
    base = ["-m", "models.training.loop", "--config", str(config_path)]
    if nproc <= 1:
        return [sys.executable, *base]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *base]


def run_training(out: Path, cfg_dict: dict[str, Any], nproc: int, logger) -> dict[str, Any]:
    """Write `config.json`, run the loop in a subprocess (resuming from `out/checkpoints`), return the summary."""
    from models.training.process import PARENT_ENV, TrainerRunningError, lock_holder

    if pid := lock_holder(out):
        raise TrainerRunningError(
            f"a trainer (pid {pid}) is still running on {out}, perhaps left by a killed run; "
            f"wait for it to finish or stop it (kill {pid}), then rerun to resume"
        )
    out.mkdir(parents=True, exist_ok=True)
    config_path = atomic_write_text(out / "config.json", json.dumps(cfg_dict, indent=2) + "\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "PYTHONUNBUFFERED": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        PARENT_ENV: str(os.getpid()),  # the trainer stops (with a checkpoint) when this process is gone
    }
    cmd = launch_command(config_path, nproc)
    logger.info("train: %s", " ".join(cmd))
    tail: deque[str] = deque(maxlen=40)

    def follow(stream) -> None:
        for line in stream:
            line = line.rstrip()
            if line.startswith(PASSED_ON) or (" epochs = " in line):
                logger.info("train: %s", line)
            tail.append(line)

    with subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        try:
            follow(proc.stdout)
        except BaseException:  # Ctrl-C, or Prefect's TerminationSignal for a SIGTERM to gur
            # Ctrl-C reached the trainer too: it finishes its step and saves a checkpoint. Keep
            # reading its output until it has (a second Ctrl-C leaves it to finish on its own).
            logger.warning("train: interrupted; waiting for the trainer to save a checkpoint")
            proc.send_signal(signal.SIGTERM)  # in case the interrupt did not come from a terminal
            follow(proc.stdout)
            proc.wait()
            raise
        code = proc.wait()
    if code != 0 and any(line.startswith("stopped at step") and "by a signal" in line for line in tail):
        # A signal reached the trainer and it saved a checkpoint: the run was stopped, not failed, also where
        # this process saw no interrupt of its own (the trainer killed alone, or a Ctrl-C that reached gur
        # outside the read loop): gur says how to resume and exits as interrupted.
        raise KeyboardInterrupt("the trainer was stopped by a signal")
    if code != 0:
        from storage.disk_space import out_of_space

        full = out_of_space(out, "\n".join(tail))  # a full disk reads as torch's zip writer failing: say so first
        then = (
            f": {full}; then rerun: it resumes from the last checkpoint"
            if full
            else " (rerun to resume from the last checkpoint)"
        )
        raise RuntimeError(f"training exited with {code}{then}:\n" + "\n".join(tail))
    return json.loads((out / "summary.json").read_text())


def label_export(folder: Path, labels: dict[str, str], **extra: Any) -> None:
    """Record method, variant and the run's fingerprint in `gur_export.json`, so the `evaluate`
    flow's metrics rows name the model and trace back to this run."""
    path = folder / "gur_export.json"
    if not path.exists():
        return
    info = json.loads(path.read_text(encoding="utf-8"))
    info.update(method=labels.get("method", METHODS[0]), **extra)
    what = extra.get("objective") or extra.get("losses") or ""
    parts = [labels.get("variant", ""), str(what), str(extra.get("train_fingerprint", ""))[:8]]
    info["variant"] = " ".join(filter(None, parts))  # e.g. "lcs lm+cl 0bb5b4bc": two runs never share a name
    atomic_write_json(path, info, sort_keys=False)


@task(name="train", **STAGE_TASK)
def train(
    source: dict[str, str], config: dict[str, Any], root: str, nproc: int = 0, labels: dict[str, str] | None = None
) -> dict[str, str]:
    """Train on `source` (see the module docstring); `config`: TrainConfig fields; `labels` go to the manifest."""
    return train_stage(source, config, root, nproc, labels)


def train_stage(
    source: dict[str, str], config: dict[str, Any], root: str, nproc: int = 0, labels: dict[str, str] | None = None
) -> dict[str, str]:
    """The task's body: reuse, resume or run one training run; an `interpolate` run mixes an unmixed one."""
    method = config.get("method", METHODS[0])
    if source["stage"] not in INPUT_STAGES.get(method, ()):
        raise ValueError(f"method {method!r} trains on {INPUT_STAGES.get(method)} outputs, not {source['stage']!r}")
    # Checkpoints are resume state, not output: neither listed in the manifest nor checked.
    logger = current_logger(__name__)
    fp = train_fingerprint(source, as_recorded(data_root(root), config))
    stage = StageOutput.open(root, "train", fp, exclude=("checkpoints",), log=logger)
    if stage.complete:
        return stage.cached()
    if config.get("interpolate", 1.0) != 1.0:
        return mix_with_start(stage, source, config, nproc, labels or {})
    where = source_dir(stage.root, source)
    out = stage.dir
    key = "shards" if method == "gur" else "questions"
    cfg = train_config(config, out_dir=str(out), **{key: str(where)})
    pairs = gur_pairs_ref(cfg)
    if pairs:
        cfg = dataclasses.replace(cfg, shards=str(source_dir(stage.root, pairs)))
    if cfg.replay_since:
        earlier = "split" if method == "documents" else "keywords"  # the kind of input the method reads
        replay = {"stage": earlier, "fingerprint": check_fingerprint(cfg.replay_since, "replay_since")}
        replay["path"] = f"{earlier}/{replay['fingerprint']}"
        cfg = dataclasses.replace(cfg, replay_source=str(ref_dir(stage.root, replay)))
    summary = run_training(out, dataclasses.asdict(cfg), nproc, logger)
    final = summary.get("final", {})
    extra = {"objective": cfg.objective} if method == "gur" else {"losses": cfg.losses, "negatives": cfg.negatives}
    upstream = [r for r in (source, pairs) if r and r["stage"] != "file"]
    if source["stage"] == "keywords":
        extra["keywords_fingerprint"] = source["fingerprint"]
    label_export(out / "export", labels or {}, train_fingerprint=fp, step=summary["step"], **extra)
    logger.info("train: done at step %s, held-out accuracy %s", summary["step"], summary.get("heldout_acc"))
    return stage.finish(
        code_version=TRAIN_CODE_VERSION,
        config=as_recorded(stage.root, {k: v for k, v in dataclasses.asdict(cfg).items() if k not in RUNTIME_KEYS}),
        inputs={source["stage"]: source["path"], **({"shuffle": pairs["path"]} if pairs else {})},
        upstream=upstream,
        tables={"train_metrics": "metrics.parquet"},
        rows={"steps": summary["step"], "metrics": len(summary.get("heldout_acc", [])), **summary.get("data", {})},
        drops={},
        extra={
            "labels": labels or {},
            "export": "export",
            "summary": {
                **{k: summary.get(k) for k in SUMMARY_KEYS},
                **({"stopped_by": summary["stopped_by"]} if "stopped_by" in summary else {}),
            },
            "final": final,
        },
    )


def gur_pairs_ref(cfg) -> dict[str, str] | None:
    """A documents run's second input: the shuffle output its GUR pairs come from (`gur_pairs`, a fingerprint),
    when it trains on them (`gur_share` > 0)."""
    if cfg.method != "documents" or cfg.gur_share <= 0:
        return None
    if not cfg.gur_pairs:
        raise ValueError("gur_share > 0 needs gur_pairs: the fingerprint of a shuffle output (GUR's pairs)")
    return stage_ref("shuffle", check_fingerprint(cfg.gur_pairs, "gur_pairs"))


def mix_with_start(
    stage: StageOutput, source: dict[str, str], config: dict[str, Any], nproc: int, labels: dict[str, str]
) -> dict[str, str]:
    """An `interpolate` run: the same run unmixed (trained or reused), then its export mixed with the start's
    weights. A curve over the mixing weight costs one training run and a few seconds per point."""
    from models.training.interpolate import interpolate_export

    cfg = train_config(config, out_dir=str(stage.dir), shards="", questions="")
    if cfg.method == "gur" or not cfg.init_from:
        raise ValueError("interpolate mixes a fine-tuned encoder with its start: method tfcsg or simcse (init_from)")
    if not 0.0 <= cfg.interpolate <= 1.0:
        raise ValueError(f"interpolate must be within [0, 1], got {cfg.interpolate}")
    unmixed = {**config, "interpolate": 1.0}
    train_stage(source, unmixed, str(stage.root), nproc, labels)  # a reused run returns a Prefect state: not read
    base = stage_ref("train", train_fingerprint(source, as_recorded(stage.root, unmixed)))
    base_dir = ref_dir(stage.root, base)
    current_logger(__name__).info(
        "train: mixing %s with its start %s at weight %g", base["path"], cfg.init_from, cfg.interpolate
    )
    interpolate_export(base_dir / "export", cfg.init_from, cfg.interpolate, stage.dir / "export")
    base_manifest = ref_manifest(stage.root, base)
    pairs = gur_pairs_ref(cfg)
    info = json.loads((base_dir / "export" / "gur_export.json").read_text(encoding="utf-8"))
    label_export(
        stage.dir / "export",
        labels,
        train_fingerprint=stage.fingerprint,
        losses=f"{info.get('losses', '')} mix {cfg.interpolate:g}",
        negatives=info.get("negatives", ""),
        **{k: info[k] for k in ("step", "keywords_fingerprint") if k in info},
        interpolate=cfg.interpolate,
        unmixed_fingerprint=base["fingerprint"],
    )
    return stage.finish(
        code_version=TRAIN_CODE_VERSION,
        config=as_recorded(stage.root, {k: v for k, v in dataclasses.asdict(cfg).items() if k not in RUNTIME_KEYS}),
        inputs={
            source["stage"]: source["path"],
            **({"shuffle": pairs["path"]} if pairs else {}),
            "unmixed": base["path"],
        },
        upstream=[r for r in (source, pairs, base) if r and r["stage"] != "file"],
        tables={},
        rows=base_manifest.get("rows", {}),
        drops={},
        extra={
            "labels": labels,
            "export": "export",
            "unmixed": base,
            "unmixed_total_s": base_manifest.get("timings", {}).get("total_s"),
            "summary": base_manifest.get("summary", {}),
            "final": base_manifest.get("final", {}),
        },
    )
