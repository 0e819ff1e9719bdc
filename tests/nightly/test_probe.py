"""A first night times a few training steps and suite documents on this machine before it plans; a root with its
own rates plans by them; `[budget] probe = false` keeps the development VM's."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from samples.tiny_bert import tiny_bert
from samples.wiki_docs import wiki_documents, write_jsonl
from tasks.nightly.budget import DEFAULT_RATES, Rates
from tasks.nightly.config import load_nightly_config
from tasks.nightly.probe import ENCODE_RATES, REFERENCE_DOC_S, REFERENCE_STEP_S, probed_rates, run_probe
from tests.helpers.nightly_config import night_of


@pytest.fixture(scope="module")
def first_night(tmp_path_factory):
    base = tmp_path_factory.mktemp("probe")
    docs = wiki_documents(40, sentences=6)
    (base / "corpus").mkdir()
    write_jsonl(base / "corpus" / "a.jsonl", docs)
    model = tiny_bert(base / "tiny-bert", [d["title"] + " " + d["text"] for d in docs])
    path = base / "nightly.toml"
    path.write_text(f'[corpus]\npath = "{base / "corpus"}"\n[train]\ninit_from = "{model}"\n', encoding="utf-8")
    return night_of(load_nightly_config(path), base / "data", suite=None), model, docs


def test_a_first_night_scales_every_default_rate_by_a_probe_of_this_machine(first_night):
    night, model, docs = first_night
    before = torch.random.get_rng_state()
    rates = probed_rates(night, DEFAULT_RATES)
    assert torch.equal(torch.random.get_rng_state(), before)  # the night's training draws what it would have
    assert not (night.base / "train").exists()  # nothing written to the root
    train = rates.train_step_s / DEFAULT_RATES.train_step_s
    encode = rates.suite_doc_s / DEFAULT_RATES.suite_doc_s
    assert 0 < train < 1 and 0 < encode < 1  # a tiny BERT is faster than MiniLM on any machine
    for name in ENCODE_RATES:
        assert getattr(rates, name) == pytest.approx(getattr(DEFAULT_RATES, name) * encode)
        assert rates.source(name).startswith("probed now: ")
    step_s, doc_s = train * REFERENCE_STEP_S, encode * REFERENCE_DOC_S  # the probe's own figures, as it says
    assert f"{step_s:.2f} s a step, {doc_s * 1000:.1f} ms a document" in rates.source("train_step_s")


def test_a_root_that_measured_its_rates_and_probe_false_are_not_probed(first_night):
    night, _, _ = first_night
    own = Rates(**{**DEFAULT_RATES.__dict__, "sources": {n: "this root" for n in ("train_step_s", *ENCODE_RATES)}})
    assert probed_rates(night, own) is own
    off = replace(night, cfg=replace(night.cfg, budget=replace(night.cfg.budget, probe=False)))
    assert probed_rates(off, DEFAULT_RATES) is DEFAULT_RATES


def test_the_probe_times_a_step_and_a_document(first_night):
    _, model, docs = first_night
    probe = run_probe(str(model), [d["text"] for d in docs[:5]], threads=1)
    assert probe.step_s > 0 and probe.doc_s > 0 and probe.step_s > probe.doc_s
