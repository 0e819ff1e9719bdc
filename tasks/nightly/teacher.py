"""`[train] teacher`: the encoder whose scores the night's candidate distils (models/training/teacher.py).

    train = resolve_teacher(train, base)     # `options["teacher"]`: a folder, or no key at all

- `""` (the default): none; the candidate learns from the corpus's pairs alone.
- `"auto"`: the strongest encoder the machine has: all-mpnet-base-v2 where `./run.sh mpnet` installed it
  (unpacked once under the root: tasks/sts/models.py), else none, said in a line.
- a folder: any sentence-transformers model (relative paths are the config file's).

Only the documents recipe distils: for another method the teacher is said to be unused, and an explicit folder
is an error. The resolved folder goes into the training options, so it is part of the candidate's fingerprint:
a night with a teacher is another run than one without.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tasks.nightly.config import TrainSection

AUTO = "auto"


def resolve_teacher(train: TrainSection, base: Path, source: Path | None = None) -> TrainSection:
    """The training section with `teacher` resolved into `options["teacher"]` (and the field itself cleared),
    said in one line. `train` with its method resolved; `base`: the root, where "auto" unpacks its model."""
    choice = train.teacher
    if not choice:
        return train
    cleared = replace(train, teacher="")
    if train.method != "documents":
        if choice != AUTO:
            raise ValueError(f"{source or 'nightly.toml'}: [train] teacher is distilled by the documents recipe "
                             f"only; this night trains {train.method}")  # fmt: skip
        print(f"teacher auto: not used ({train.method} distils no teacher)")
        return cleared
    folder = installed_teacher(base) if choice == AUTO else Path(choice)
    if folder is None:
        print("teacher auto -> none: all-mpnet-base-v2 is not installed (`./run.sh mpnet` installs it)")
        return cleared
    if not (folder / "config.json").is_file():
        raise ValueError(f"{source or 'nightly.toml'}: [train] teacher {folder}: not a model folder (no config.json)")
    said = f"{'auto -> ' if choice == AUTO else ''}{teacher_name(str(folder))}"
    print(f"teacher {said}: the candidate learns its scores of each query against the batch's passages")
    return replace(cleared, options={**train.options, "teacher": str(folder)})


def installed_teacher(base: Path) -> Path | None:
    """all-mpnet-base-v2's folder under the root where its packages are installed, else None."""
    from tasks.sts.models import mpnet_folder, mpnet_parts

    try:
        mpnet_parts()
    except FileNotFoundError:
        return None
    return mpnet_folder(base)


def teacher_name(folder: str) -> str:
    """A teacher's name for lines and rows: all-mpnet-base-v2's unpacked folder by its model's name."""
    path = Path(folder)
    return "all-mpnet-base-v2" if path.name == "model" or "mpnet" in path.name.lower() else path.name
