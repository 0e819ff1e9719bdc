"""Weight interpolation between a fine-tuned encoder and the encoder it started from (WiSE-FT,
Wortsman et al. 2022): w * trained + (1 - w) * start, tensor by tensor.

Fine-tuning moves the weights along a path where domain retrieval rises and general similarity
falls; a point between the two ends often keeps most of the first and little of the second's loss.
`interpolate_state` is the maths on two state dicts; `interpolate_export` writes a mixed copy of a
sentence-transformers export (its pooling and normalise modules, tokenizer and labels unchanged).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from torch import Tensor

from storage.atomic import atomic_path


def interpolate_state(trained: dict[str, Tensor], start: dict[str, Tensor], weight: float) -> dict[str, Tensor]:
    """Floating-point tensors present in both with the same shape are mixed; the rest (integer buffers such
    as position ids, parameters the start lacks) keep the trained value."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"interpolation weight must be within [0, 1], got {weight}")
    mixed = {}
    for name, value in trained.items():
        base = start.get(name)
        if base is not None and base.shape == value.shape and value.is_floating_point():
            mixed[name] = (weight * value.float() + (1.0 - weight) * base.float()).to(value.dtype)
        else:
            mixed[name] = value
    return mixed


def interpolate_export(trained_dir: str | Path, start_dir: str | Path, weight: float, out: str | Path) -> Path:
    """A copy of the export `trained_dir` whose transformer weights (`model.safetensors`, as `export_encoder`
    writes them) are mixed with those of `start_dir`, the HF folder it was trained from."""
    from safetensors.torch import load_file, save_file
    from transformers import AutoModel

    trained_dir, out = Path(trained_dir), Path(out)
    trained = load_file(str(trained_dir / "model.safetensors"))
    start = AutoModel.from_pretrained(str(start_dir)).state_dict()
    missing = [
        n for n, v in trained.items() if v.is_floating_point() and getattr(start.get(n), "shape", None) != v.shape
    ]
    if missing:
        raise ValueError(
            f"{start_dir} is not the encoder {trained_dir} was trained from (no start value for {missing[:3]})"
        )
    mixed = interpolate_state(trained, start, weight)
    with atomic_path(out) as tmp:
        shutil.copytree(trained_dir, tmp, dirs_exist_ok=True)
        save_file(
            {k: v.contiguous() for k, v in mixed.items()}, str(tmp / "model.safetensors"), metadata={"format": "pt"}
        )
    return out
