"""TFCSG end to end on real titles with a tiny random BERT: keywords -> train (Ctrl-C, resume) -> export -> evaluate.

The encoder is a 2-layer BERT with random weights and a vocabulary built from the titles, saved as
a model folder, so the run takes seconds on one CPU thread and uses exactly the warm-start path
that MiniLM takes (AutoModelForMaskedLM, a new LM head tied to the embeddings).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


from samples.tiny_bert import tiny_bert, titles, write_titles  # noqa: E402
from tests.helpers.torchrun import run_two_ranks  # noqa: E402
from tests.helpers.trainer_process import interrupt_at_step  # noqa: E402

LOSSES = "cl+kl+s2s+kw"  # every task, so every path of the loss runs
OPTIONS = dict(
    losses=LOSSES,
    negatives="topic-masked",
    batch_size=8,
    eval_batch=8,
    eval_every=5,
    heldout_fraction=0.1,
    log_every=2,
    ckpt_every=5,
    lr=1e-3,
    threads=1,
)
COMPARED = ("step", "loss", "cl_loss", "kl_loss", "s2s_loss", "kw_loss", "train_acc", "heldout_acc")

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.slow]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from flows.mine_keywords import mine_keywords

    base = tmp_path_factory.mktemp("tfcsg")
    rows = titles(200)
    questions, labelled = write_titles(base, rows)
    root = base / "data"
    kw = mine_keywords(input_path=str(questions), text_field="title", title_field="", k=10, root=str(root))
    model = tiny_bert(base / "tiny-bert", [r["title"] for r in rows])
    return {"root": root, "keywords": kw, "model": model, "labelled": labelled, "questions": questions}


def test_missing_keywords_table_is_a_clear_error(tmp_path):
    from flows.train import train_flow

    with pytest.raises(FileNotFoundError, match="no complete 'keywords' output .*gur mine-keywords"):
        train_flow(method="tfcsg", preset="cpu", root=str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="needs keyword sequences"):
        train_flow(method="tfcsg", preset="cpu", texts=str(tmp_path), root=str(tmp_path / "empty"))


def test_interrupted_tfcsg_run_resumes_exports_and_evaluates(setup, tmp_path):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer

    from flows.evaluate import evaluate
    from flows.train import resolve_config, train_flow
    from models.tfcsg.model import TfcsgModel
    from models.training.loop import train as train_loop
    from storage.manifest import read_manifest
    from tasks.train.task import train_config, train_fingerprint

    root, kw, model = setup["root"], setup["keywords"], str(setup["model"])
    config = resolve_config("tfcsg", "cpu", 20, None, None, model, "lm+cl", dict(OPTIONS))
    assert config["interpolate"] == 0.75  # the preset mixes the export with the start: training is a run of its own
    trained_config = {**config, "interpolate": 1.0}
    out = root / "train" / train_fingerprint(kw, trained_config)
    cfg = train_config(trained_config, out_dir=str(out), questions=str(root / kw["path"]))
    (tmp_path / "cfg.json").write_text(json.dumps(dataclasses.asdict(cfg)))

    # a real trainer process gets Ctrl-C after step 6: it finishes the step, saves and exits 3
    lines = interrupt_at_step(tmp_path / "cfg.json", 6)
    assert any(line.startswith("questions: ") and "LM head new, tied" in line for line in lines)
    saved = sorted((out / "checkpoints").glob("step-*.pt"))
    assert saved and 6 <= int(saved[-1].stem.split("-")[1]) < 20

    # the flow with the same settings lands on the same folder and resumes there
    ref = train_flow(
        method="tfcsg",
        preset="cpu",
        steps=20,
        init_from=model,
        keywords=kw["fingerprint"],
        options=OPTIONS,
        root=str(root),
    )
    mixed = read_manifest(root / ref["path"])
    assert root / mixed["unmixed"]["path"] == out and mixed["config"]["interpolate"] == 0.75
    export = root / ref["path"] / "export"  # the model: 0.75 * trained + 0.25 * start
    manifest = read_manifest(out)
    assert manifest["rows"]["steps"] == 20
    assert manifest["rows"]["rows"] == 200 and manifest["rows"]["train_rows"] + manifest["rows"]["heldout_rows"] == 200
    assert "truncated_questions" in manifest["rows"] and manifest["summary"]["lm_head_loaded"] is False
    assert manifest["config"]["losses"] == LOSSES and manifest["upstream"] == [kw]
    info = json.loads((out / "export" / "gur_export.json").read_text())
    assert info["method"] == "tfcsg" and info["losses"] == LOSSES and info["keywords_fingerprint"] == kw["fingerprint"]

    # an uninterrupted run gives the same curve: resume is exact
    whole = dataclasses.replace(cfg, out_dir=str(tmp_path / "whole"), export=False)
    assert train_loop(whole)["complete"]

    def curve(folder: Path) -> list[dict]:
        ckpt = torch.load(folder / "checkpoints" / "step-00000020.pt", weights_only=False)
        return [{k: r.get(k) for k in COMPARED} for r in ckpt["metrics"]]

    resumed, straight = curve(out), curve(tmp_path / "whole")
    assert [r["step"] for r in resumed] == [0, 2, 4, 5, 6, 8, 10, 12, 14, 15, 16, 18, 20]
    assert resumed == straight
    assert all(r["kl_loss"] is not None and r["s2s_loss"] is not None for r in resumed[1:])

    # the export loads as a SentenceTransformer and gives the trained model's vectors
    texts = [r["title"] for r in titles(5)]
    st = SentenceTransformer(str(export), device="cpu").encode(texts, convert_to_tensor=True)
    trained = TfcsgModel(str(export), pooling="mean").eval()
    batch = AutoTokenizer.from_pretrained(str(export))(texts, padding=True, return_tensors="pt")
    assert torch.allclose(st, trained.embed(batch["input_ids"], batch["attention_mask"]), atol=1e-5)

    # Scored on 200 titles it never trained on, against its own init: training must have helped. On its
    # training titles the same evaluation is flagged, with the overlap counted.
    unseen = write_titles(tmp_path, titles(400)[200:])[1]
    result = evaluate(
        models=[str(export), str(model)],
        stackoverflow=str(unseen),
        stsb=[],
        lee=False,
        demo_retrieval=False,
        root=str(root),
    )
    import duckdb

    con = duckdb.connect(str(root / "catalog.duckdb"), read_only=True)
    rows = con.execute(
        "SELECT model_spec, value, detail FROM metrics WHERE task = 'question_retrieval' AND metric = 'map' "
        "AND dataset_path = ?",
        [str(unseen)],
    ).fetchall()
    con.close()
    values = {spec: (value, detail) for spec, value, detail in rows}
    trained, init = values[ref["path"] + "/export"], values[str(model)]  # a model under the root: relative to it
    assert trained[0] > init[0] and "OVERLAP" not in trained[1]
    assert Path(result["report"]).exists()
    seen = evaluate(
        models=[str(export)],
        stackoverflow=str(setup["labelled"]),
        stsb=[],
        lee=False,
        demo_retrieval=False,
        root=str(root),
    )
    report = Path(seen["report"]).read_text(encoding="utf-8")
    assert "OVERLAP: " in report and "texts are in the model's training input (keywords/" in report


def test_simcse_on_a_text_file_and_on_keywords(setup):
    from flows.train import train_flow
    from storage.manifest import read_manifest

    options = dict(OPTIONS, losses="cl", text_field="title")
    ref = train_flow(
        method="simcse",
        preset="cpu",
        steps=4,
        init_from=str(setup["model"]),
        texts=str(setup["questions"]),
        options=options,
        root=str(setup["root"]),
    )
    manifest = read_manifest(setup["root"] / ref["path"])
    assert manifest["inputs"] == {"file": str(setup["questions"])} and manifest["upstream"] == []
    assert manifest["config"]["method"] == "simcse" and manifest["config"]["negatives"] == "topic-masked"
    assert manifest["summary"]["heldout_acc"] == []  # a plain text file has no keyword sequences to score
    # on a keywords output SimCSE trains on the questions and is scored like TFCSG (question -> own keywords)
    ref = train_flow(
        method="simcse",
        preset="cpu",
        steps=4,
        init_from=str(setup["model"]),
        keywords=setup["keywords"]["fingerprint"],
        options={k: v for k, v in OPTIONS.items() if k not in ("losses", "negatives")},
        root=str(setup["root"]),
    )
    manifest = read_manifest(setup["root"] / ref["path"])
    assert manifest["config"]["losses"] == "cl" and manifest["config"]["negatives"] == "all"
    assert [step for step, _ in manifest["summary"]["heldout_acc"]] == [0, 4]
    with pytest.raises(ValueError, match="simcse trains the `cl` loss alone"):
        train_flow(
            method="simcse",
            preset="cpu",
            steps=4,
            init_from=str(setup["model"]),
            texts=str(setup["questions"]),
            options=dict(options, losses="kw"),
            root=str(setup["root"]),
        )


def test_two_process_ddp_tfcsg_on_cpu(setup, tmp_path):
    """The same loop under torchrun (gloo): each rank takes its half of every global batch."""
    from flows.train import resolve_config
    from tasks.train.task import train_config

    root, kw, model = setup["root"], setup["keywords"], str(setup["model"])
    config = resolve_config("tfcsg", "cpu", None, None, None, model, "lm+cl", dict(OPTIONS, epochs=1.0))
    cfg = train_config(config, out_dir=str(tmp_path / "ddp"), questions=str(root / kw["path"]))
    (tmp_path / "cfg.json").write_text(json.dumps(dataclasses.asdict(dataclasses.replace(cfg, export=False))))
    proc = run_two_ranks(tmp_path / "cfg.json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((tmp_path / "ddp" / "summary.json").read_text())
    train_rows = summary["data"]["train_rows"]
    assert summary["complete"] and summary["step"] == -(-train_rows // (2 * OPTIONS["batch_size"]))  # one epoch
    ckpt = torch.load(sorted((tmp_path / "ddp" / "checkpoints").glob("*.pt"))[-1], weights_only=False)
    assert ckpt["world_size"] == 2 and ckpt["data"][0] == ckpt["data"][1]  # one shared batch counter


def test_start_anchors_train_and_an_interpolated_run_reuses_its_unmixed_run(setup):
    """A few real steps with both anchors on, then two mixing weights: one training run, two mixed exports."""
    import pyarrow.parquet as pq
    from safetensors.torch import load_file

    from flows.train import train_flow
    from storage.manifest import read_manifest

    options = dict(OPTIONS, losses="kw+s2s", sim_anchor_weight=1.0, l2sp_weight=0.01)
    common = dict(method="tfcsg", preset="cpu", steps=4, init_from=str(setup["model"]), root=str(setup["root"]))
    common["keywords"] = setup["keywords"]["fingerprint"]
    mixed = train_flow(**common, options=dict(options, interpolate=0.5))
    manifest = read_manifest(setup["root"] / mixed["path"])
    unmixed = manifest["unmixed"]
    metrics = read_manifest(setup["root"] / unmixed["path"])
    table = pq.read_table(setup["root"] / unmixed["path"] / "metrics.parquet").to_pylist()
    rows = [r for r in table if r.get("l2sp_loss") is not None]
    assert rows and all(r["anchor_loss"] >= 0 for r in rows) and rows[-1]["l2sp_loss"] > 0  # the weights moved
    assert metrics["config"]["interpolate"] == 1.0 and manifest["config"]["interpolate"] == 0.5
    start = load_file(str(setup["model"] / "model.safetensors"))
    trained = load_file(str(setup["root"] / unmixed["path"] / "export" / "model.safetensors"))
    half = load_file(str(setup["root"] / mixed["path"] / "export" / "model.safetensors"))
    name = "encoder.layer.0.attention.self.query.weight"
    assert torch.allclose(half[name], (trained[name] + start[name]) / 2, atol=1e-6)
    assert not torch.allclose(trained[name], start[name])
    label = json.loads((setup["root"] / mixed["path"] / "export" / "gur_export.json").read_text())
    assert label["interpolate"] == 0.5 and label["unmixed_fingerprint"] == unmixed["fingerprint"]
    # the run's artifacts show the curves and summary of the training behind the mix
    from tasks.runtime.artifacts import train_markdown, train_summary_rows, trained_dir

    assert trained_dir(setup["root"], mixed) == setup["root"] / unmixed["path"]
    markdown = train_markdown(setup["root"], mixed, since=0.0)
    assert "mixed with the start's weights at 0.5" in markdown and "data:image/png;base64," in markdown
    assert "| step | heldout_acc |" in markdown
    fields = {r["field"]: r["value"] for r in train_summary_rows(setup["root"], mixed, since=0.0)}
    assert fields["trained in"] == str(setup["root"] / unmixed["path"]) and fields["interpolate"] == "0.5"
    # a second weight trains nothing: the unmixed run is reused as it is
    finished = metrics["finished_at"]
    quarter = train_flow(**common, options=dict(options, interpolate=0.25))
    assert read_manifest(setup["root"] / quarter["path"])["unmixed"] == unmixed
    assert read_manifest(setup["root"] / unmixed["path"])["finished_at"] == finished
    assert quarter["fingerprint"] != mixed["fingerprint"]
    with pytest.raises(ValueError, match="interpolate"):
        train_flow(**common, options=dict(options, interpolate=1.5))


@pytest.mark.soak
def test_bf16_trains_on_the_cpu_close_to_fp32_but_not_bit_equal(setup):
    """`dtype: bf16` runs the forward pass under CPU autocast (models.training.precision): the same seed gives a
    loss curve within bf16's rounding of the fp32 one, and a run of its own (dtype is in the fingerprint)."""
    import pyarrow.parquet as pq

    from flows.train import train_flow
    from storage.manifest import read_manifest

    common = dict(method="tfcsg", preset="cpu", steps=2, init_from=str(setup["model"]), root=str(setup["root"]))
    common["keywords"] = setup["keywords"]["fingerprint"]
    losses, paths = {}, {}
    for dtype in ("fp32", "bf16"):
        ref = train_flow(**common, options=dict(OPTIONS, losses="kw+s2s", interpolate=1.0, log_every=1, dtype=dtype))
        paths[dtype] = ref["path"]
        assert read_manifest(setup["root"] / ref["path"])["config"]["dtype"] == dtype
        table = pq.read_table(setup["root"] / ref["path"] / "metrics.parquet").to_pylist()
        losses[dtype] = [r["loss"] for r in table if r.get("loss") is not None]
    assert paths["fp32"] != paths["bf16"]
    assert len(losses["bf16"]) == len(losses["fp32"]) == 2
    assert losses["bf16"][0] != losses["fp32"][0]  # the matrix products ran in bf16
    assert losses["bf16"][0] == pytest.approx(losses["fp32"][0], rel=0.05)
