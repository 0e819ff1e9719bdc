"""The `sts` flow: cached resumable units, `metrics` rows in the catalog, the report beside the survey."""

from __future__ import annotations

import shutil

import pytest

from samples.tiny_bert import tiny_bert
from tests.helpers.flow_runs import task_run_states
from tests.helpers.shared_data import require_shared
from tests.helpers.sts_fixtures import STSB, stsb_rows, tiny_llama, write_csv

pytestmark = pytest.mark.usefixtures("prefect_harness")


def test_sts_flow_units_cache_catalog_report(tmp_path):
    require_shared(STSB / "stsb-en-train.csv")
    from flows.sts import sts
    from storage.catalog import connect_catalog
    from storage.manifest import read_manifest
    from storage.stage_output import ref_dir

    rows = stsb_rows("en", "train", 32)
    texts = [t for r in rows for t in r[:2]]
    bert, llama = tiny_bert(tmp_path / "bert", texts), tiny_llama(tmp_path / "llama", texts)
    params = dict(
        families=["glove", "rnn", f"cross:{bert}", f"llm-lora:{llama}"],
        train=str(write_csv(tmp_path / "train.csv", rows)),
        dev=str(write_csv(tmp_path / "dev.csv", stsb_rows("en", "dev", 16))),
        test=str(write_csv(tmp_path / "test.csv", stsb_rows("en", "dev", 16, skip=16))),
        overrides={"max_steps": 2, "batch_size": 8},
        root=str(tmp_path / "data"),
    )
    state = sts(**params, return_state=True)
    result = state.result()
    root = tmp_path / "data"
    assert len(result["units"]) == 4
    assert [s for name, s in task_run_states(state) if name == "sts-unit"] == ["Completed"] * 4
    lora = next(
        ref_dir(root, u) for u in result["units"] if read_manifest(ref_dir(root, u))["family"].startswith("llm-lora")
    )
    assert (lora / "adapter" / "adapter_model.safetensors").exists()
    out = ref_dir(root, result["report"])
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "| survey row |" in report and "GloVe-Pretrained | 0.191 | 0.237 | 0.274" in report
    assert "## dev" in report and "## test" in report and (out / "sts.png").stat().st_size > 1000

    con = connect_catalog(root)
    try:
        got = con.execute(
            "SELECT model, dataset, metric, value, run_fingerprint FROM metrics WHERE task = 'sts_supervised'"
        ).fetchall()
    finally:
        con.close()
    assert len(got) == 4 * 2 * 3  # units x (dev, test) x (mse, pearson, spearman)
    assert {(m, d) for m, d, *_ in got} >= {("glove", "dev"), ("rnn", "test"), ("cross:bert", "dev")}
    assert {fp for *_, fp in got} == {u["fingerprint"] for u in result["units"]}

    # a rerun trains nothing; a unit whose output is gone is the only one trained again
    again = sts(**params, return_state=True)
    assert [s for name, s in task_run_states(again) if name == "sts-unit"] == ["Cached"] * 4
    shutil.rmtree(ref_dir(root, result["units"][1]))
    resumed = sts(**params, return_state=True)
    assert sorted(s for name, s in task_run_states(resumed) if name == "sts-unit") == ["Cached"] * 3 + ["Completed"]
    assert resumed.result()["units"] == result["units"]


def test_sts_flow_errors_before_work(tmp_path):
    from flows.sts import sts

    with pytest.raises(ValueError, match="unknown sts family 'nope'"):
        sts(families=["nope"], root=str(tmp_path))
    with pytest.raises(FileNotFoundError, match="STS file not found: .*missing.csv"):
        sts(families=["glove"], train=str(tmp_path / "missing.csv"), root=str(tmp_path))
    assert not (tmp_path / "sts-unit").exists()


def test_gur_sts_errors_are_one_line(tmp_path, capsys):
    from gur_cli import main

    csv = write_csv(tmp_path / "t.csv", [["a", "b", "1"]])
    cases = [
        (["sts", "nope"], "unknown sts family 'nope'"),
        (["sts", f"siamese:{tmp_path / 'gone'}"], "model folder not found"),
        (["sts", "glove", "--train", str(tmp_path / "none.csv")], "none.csv"),
        (["sts", "glove", "--lang", "en", "zh", "--train", str(csv)], "give one --lang"),
        (["sts", "glove", "--holdout", "1.5"], "--holdout 1.5: expected a share"),
        (["sts", "glove", "--options", '{"epoch": 4}'], "not a StsTrainConfig field; did you mean 'epochs'"),
        (["sts", "glove", "--options", "{epochs: 4}"], "--options: not valid JSON"),
    ]
    for argv, message in cases:
        assert main([*argv, "--root", str(tmp_path / "data")]) == 1
        err = capsys.readouterr().err.strip()
        assert err.startswith("gur: error:") and message in err and "\n" not in err, err
    assert not (tmp_path / "data").exists()


def test_holdout_scores_a_share_of_train_that_training_never_sees(tmp_path):
    require_shared(STSB / "stsb-en-train.csv")
    import pyarrow.parquet as pq

    from flows.sts import sts
    from storage.manifest import read_manifest
    from storage.stage_output import ref_dir
    from tasks.sts.data import read_sts_csv, split_holdout

    train = write_csv(tmp_path / "train.csv", stsb_rows("en", "train", 40))
    params = dict(
        families=["w2v-cbow", "rnn"],
        train=str(train),
        dev=str(write_csv(tmp_path / "dev.csv", stsb_rows("en", "dev", 16))),
        overrides={"max_steps": 2, "batch_size": 8},
        root=str(tmp_path / "data"),
    )
    plain = sts(**params)
    held = sts(**params, holdout=0.25)
    root = tmp_path / "data"
    assert {u["fingerprint"] for u in plain["units"]}.isdisjoint(u["fingerprint"] for u in held["units"])
    assert read_manifest(ref_dir(root, plain["units"][1]))["rows"]["train_pairs"] == 40
    rnn = ref_dir(root, held["units"][1])
    assert read_manifest(rnn)["rows"]["train_pairs"] == 30  # 40 pairs less the 10 held out

    def datasets(unit: dict) -> set[str]:
        return {r["dataset"] for r in pq.read_table(ref_dir(root, unit) / "part-00000.parquet").to_pylist()}

    assert datasets(plain["units"][1]) == {"dev"} and datasets(held["units"][1]) == {"train-holdout25", "dev"}

    def variants(unit: dict) -> set[str]:
        return {r["variant"] for r in pq.read_table(ref_dir(root, unit) / "part-00000.parquet").to_pylist()}

    # every row of a holdout unit, its dev row too, says it trained on less than the plain unit's
    assert all(v.endswith(" holdout=0.25") for v in variants(held["units"][1]))
    assert not any("holdout" in v for v in variants(plain["units"][1]))
    predictions = pq.read_table(rnn / "predictions.parquet").to_pylist()
    gold = [r["gold"] for r in predictions if r["split"] == "holdout"]
    assert gold == split_holdout(read_sts_csv(train), 0.25)[1].score.tolist()
    # the word2vec family trains its vectors on the training sentences: the held-out ones are not among them
    assert read_manifest(ref_dir(root, held["units"][0]))["rows"]["train_pairs"] == 30
