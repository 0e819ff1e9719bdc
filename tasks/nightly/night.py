"""What a night works from, fixed at its start, and what it has done that a failed night's row names.

    night = open_night(cfg, base, name, state)   # the suite split, the recipe, the start model
    night.corpus, night.train                      # the training side and the resolved method: values of their own
    night.cfg                                      # the configuration as loaded, never rewritten

The night's configuration names the user's folder and `method = "auto"`; the night trains on the split's
training mirror with the method the corpus's shape chose. Both are fields of `Night`, so every step reads the
same values and the loaded configuration stays what the file said.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.encoders import minilm_path
from storage.champion import read_champion, record_start
from tasks.nightly.config import CorpusConfig, NightlyConfig, TrainSection
from tasks.nightly.gate_suite import GateSuite, gate_suite
from tasks.nightly.recipe import resolve_method
from tasks.nightly.report import training_settings
from tasks.nightly.teacher import resolve_teacher
from tasks.nightly.upkeep import make_room


@dataclass
class NightState:
    """What a night has done so far that its decision row names, a failed night's too: the candidate once
    trained (gc then counts it as judged: its weights can go) and what retention freed at the start."""

    candidate: str = ""
    early_gc: str = ""  # `make_room`'s retention, when it ran
    early_freed: int = 0

    def columns(self) -> dict[str, Any]:
        """The decision row's columns of a night that stopped: what it had done."""
        out: dict[str, Any] = {"gc": self.early_gc, "gc_freed_bytes": self.early_freed} if self.early_gc else {}
        return {**out, "candidate": self.candidate} if self.candidate else out

    def with_early_gc(self, done: dict[str, Any]) -> dict[str, Any]:
        """The night's retention columns: the end's, after what `make_room` freed at the start when it ran."""
        if not self.early_gc:
            return done
        freed = self.early_freed + done.get("gc_freed_bytes", 0)
        return {"gc": f"{self.early_gc}; at the end: {done['gc']}", "gc_freed_bytes": freed}


@dataclass(frozen=True)
class Night:
    """One night's fixed inputs: the configuration as loaded, the root, the flow run, its start time, the
    corpus it trains on (the training side), the training section with its method resolved, the gate's
    suite, the champion at the start (None on a first night) and the model the candidate starts from."""

    cfg: NightlyConfig
    base: Path
    name: str
    started: float
    corpus: CorpusConfig
    train: TrainSection
    suite: GateSuite
    champion: dict[str, Any] | None
    start: str
    state: NightState = field(default_factory=NightState, compare=False)

    @property
    def method(self) -> str:
        return self.train.method

    @property
    def settings(self) -> str:
        """What besides the data decides the candidate (tasks/nightly/report.py: training_settings)."""
        return training_settings(self.train, self.cfg.keywords)

    def elapsed(self) -> float:
        return time.time() - self.started


def start_of(cfg: NightlyConfig, champion: dict[str, Any] | None) -> str:
    """The model the candidate trains from, whatever the method: the champion, else the configured init, else
    the shipped MiniLM."""
    return champion["export"] if champion else cfg.train.init_from or str(minilm_path())


def open_night(cfg: NightlyConfig, base: Path, name: str, state: NightState) -> Night:
    """The night's start, before its data stages: the loader's notes printed, room made on a full disk (before
    the night writes anything), the gate's suite split off the corpus, the recipe chosen on the training side
    (the held-out records never decide it) and, until a promotion, the start model recorded as the model in use
    (embed, search and `gur models` say so)."""
    started = time.time()
    for note in cfg.notes:
        print(note)
    champion = read_champion(base)
    start = start_of(cfg, champion)
    if done := make_room(cfg, base, start):
        state.early_gc, state.early_freed = f"at the start: {done['gc']}", done.get("gc_freed_bytes", 0)
    corpus, suite = gate_suite(cfg, base)
    train = resolve_teacher(resolve_method(cfg.train, corpus), base, cfg.source)
    if champion is None:
        record_start(base, start, cfg.source)
    return Night(cfg, base, name, started, corpus, train, suite, champion, start, state)
