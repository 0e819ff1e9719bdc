"""Which model `gur embed` and `gur search` use: a model string, else the model in use (the champion, else the
start model a night recorded, else MiniLM); never a train export that no gate promoted.

Model strings are evaluate's (`tasks/evaluate/models.py`) restricted to encoders loaded from a folder:
`minilm`, or a sentence-transformers / Hugging Face model folder (a `train` export). A folder that
is not an encoder is one line here, before any work.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from storage.champion import read_champion, read_start
from storage.layout import MANIFEST, recorded_path


@dataclass(frozen=True)
class ChosenModel:
    spec: str  # what was asked for ("minilm", a folder) or what the default resolved to
    path: str  # the folder the weights load from
    fingerprint: str  # tasks.evaluate.models.model_fingerprint: the weights' bytes
    why: str  # "given", "champion #3", "the start model (no candidate promoted yet)"


def check_encoder_folder(path: Path, what: str = "model") -> None:
    """A folder sentence-transformers can load as an encoder: a `modules.json` (sentence-transformers) or a
    `config.json` naming a transformer architecture; anything else is one clear line."""
    if not path.is_dir():
        raise FileNotFoundError(f"{what} {path}: no such folder")
    if (path / "modules.json").exists():
        return
    config = path / "config.json"
    if not config.exists():
        raise ValueError(
            f"{what} {path}: not an encoder folder (no modules.json or config.json): give a train export "
            "(data/train/<fingerprint>/export), minilm, or a sentence-transformers model folder"
        )
    try:
        model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError) as exc:
        raise ValueError(f"{what} {path}: config.json is not readable JSON ({exc})") from None
    if not model_type:
        raise ValueError(f"{what} {path}: config.json names no model_type, so it is not a transformer encoder")


def model_in_use(root: Path) -> tuple[str, str]:
    """(model folder, what it is): the champion, else the start model the first night recorded, else the
    shipped MiniLM (every recipe's default start). Never a candidate no gate promoted."""
    champion = read_champion(root)
    if champion is not None:
        return champion["export"], f"champion #{champion['number']}"
    start = read_start(root)
    if start is not None:
        return start["export"], "the start model (no candidate promoted yet)"
    from models.encoders import minilm_path

    return str(minilm_path()), "the shipped MiniLM (no night has run and no model was promoted)"


def default_model(root: Path) -> tuple[str, str]:
    """(model folder, why): the model in use."""
    return model_in_use(root)


def choose_model(root: Path, spec: str | None) -> ChosenModel:
    """The model a command names (or the default), checked and fingerprinted without loading it."""
    from models.encoders import minilm_path
    from tasks.evaluate.models import model_fingerprint

    why = "given"
    if not spec:
        spec, why = default_model(root)
    spec = spec.strip()
    if spec == "minilm":
        path = minilm_path()
    elif ":" in spec and not Path(spec).exists():
        raise ValueError(f"model {spec!r}: embed and search take minilm or a model folder, not a baseline string")
    else:
        path = Path(spec).expanduser().resolve()
        check_encoder_folder(path)
    return ChosenModel(spec=spec, path=str(path), fingerprint=model_fingerprint(str(path)), why=why)


def start_model(root: Path, export: str) -> str:
    """The pretrained model a train export's chain of warm starts began from (`init_from` of its train
    output, followed through earlier exports): what the search page shows beside the champion. A GUR model
    trained from scratch, or a folder that is no train export, is compared with `minilm` (as the night does)."""
    path, seen = Path(export).resolve(), 0
    train = (Path(root) / "train").resolve()
    while path.parent.parent == train and seen < 100:
        manifest = path.parent / MANIFEST
        init = (
            json.loads(manifest.read_text(encoding="utf-8")).get("config", {}).get("init_from")
            if manifest.exists()
            else ""
        )
        if not init:
            return "minilm"
        path, seen = Path(recorded_path(root, init)).resolve(), seen + 1  # recorded before a move: where it is now
    from models.encoders import minilm_path

    if path == minilm_path().resolve():
        return "minilm"
    return str(path) if path != Path(export).resolve() else "minilm"
