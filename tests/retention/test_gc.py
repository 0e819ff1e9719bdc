"""`gur gc`: what it keeps (the champion and its predecessors, the newest builds, runs in progress, what a
running build holds), what it deletes (refused candidates' weights, finished checkpoints, old builds), and
that the root verifies, rolls back and reads in the DuckDB CLI afterwards, also after a kill -9 mid-gc."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gur_cli import main as gur
from storage.champion import read_champion, record_decision, roll_back, set_champion
from storage.shared_data import shared_data
from storage.stage_output import StageOutput, ref_dir, verify_outputs
from tasks.retention.collect import collect
from tasks.retention.plan import RetentionConfig, plan
from tasks.retention.sweep import freed_by, freed_by_stage, size_by_stage, size_of
from tests.helpers import REPO
from tests.helpers.gur_subprocess import gur_env
from tests.helpers.shared_data import require_shared
from tests.helpers.slow_down import slow_down

pytestmark = pytest.mark.usefixtures("prefect_harness")
BIN = Path(sys.executable).parent


def write_day(folder: Path, day: int) -> None:
    docs = [
        {
            "title": f"Topic {day}-{i}",
            "text": f"The river {day} runs past mill {i}. The river {day} runs past town {i}.",
        }
        for i in range(6)
    ]
    (folder / f"day{day}.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")


def train_output(root: Path, name: str, upstream: list[dict], metrics: bool = False) -> dict[str, str]:
    """A finished training run's folder, as the train stage leaves it (export, checkpoints, and with `metrics`
    the `metrics.parquet` the catalog's `train_metrics` reads)."""
    out = StageOutput.open(
        root, "train", hashlib.blake2b(name.encode(), digest_size=8).hexdigest(), exclude=("checkpoints",)
    )
    (out.dir / "export").mkdir(parents=True)
    (out.dir / "export" / "modules.json").write_text("[]", encoding="utf-8")
    (out.dir / "export" / "model.safetensors").write_bytes(bytes(200_000))
    (out.dir / "checkpoints" / "step-00010").mkdir(parents=True)
    (out.dir / "checkpoints" / "step-00010" / "state.pt").write_bytes(bytes(300_000))
    (out.dir / "summary.json").write_text(json.dumps({"name": name}), encoding="utf-8")
    if metrics:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"step": [1, 2], "loss": [2.0, 1.5]}), out.dir / "metrics.parquet")
    tables = {"train_metrics": "metrics.parquet"} if metrics else {}
    return out.finish(
        code_version="test", config={"name": name}, inputs={}, upstream=upstream, tables=tables, rows={}, drops={}
    )


@pytest.fixture(scope="module")
def grown_template(tmp_path_factory, prefect_harness):
    """`grown_root` built once for the module (three builds, about 4 s), with a pristine copy to restore from."""
    base = tmp_path_factory.mktemp("grown")
    built = grow(base / "live")
    subprocess.run(["cp", "-a", str(base / "live"), str(base / "pristine")], check=True)  # -a: hard links too
    return base, built


@pytest.fixture
def grown_root(grown_template):
    """Three nightly builds of a growing folder, champions #1 and #2, a refused candidate, a run of your own:
    the module's one build restored in place (same paths, times and hard links) before each test."""
    base, built = grown_template
    shutil.rmtree(base / "live")
    subprocess.run(["cp", "-a", str(base / "pristine"), str(base / "live")], check=True)
    return copy.deepcopy(built)


def grow(folder: Path) -> dict:
    from flows.build_pairs import build_pairs

    folder.mkdir()
    corpus, root = folder / "corpus", folder / "data"
    corpus.mkdir()
    builds = []
    for day in (1, 2, 3):
        write_day(corpus, day)
        builds.append(build_pairs(input_path=str(corpus), root=str(root), workers=1)["shards"])
    runs = {name: train_output(root, name, [builds[-1]]) for name in ("first", "second", "refused", "mine")}
    exports = {name: str(ref_dir(root, ref) / "export") for name, ref in runs.items()}
    for name in ("first", "second"):
        set_champion(root, {"export": exports[name], "train": runs[name]})
        record_decision(root, {"decision": "promoted", "candidate": exports[name]})
    record_decision(root, {"decision": "refused", "candidate": exports["refused"]})
    (root / "train" / "0123456789abcdef").mkdir(parents=True)  # a run in progress: no manifest yet
    (root / "train" / "0123456789abcdef" / "checkpoints").mkdir()
    return {"root": root, "builds": builds, "runs": runs, "exports": exports, "corpus": corpus}


def duckdb_reads_every_view(root: Path) -> list[str]:
    """Every view of the catalog, read by the DuckDB CLI (a separate process, as a user opens it)."""
    views = subprocess.run(
        [str(BIN / "duckdb"), "-readonly", "-csv", "-noheader", str(root / "catalog.duckdb"), "-c",
         "SELECT DISTINCT schema_name || '.' || view_name FROM duckdb_views() WHERE NOT internal"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    query = "".join(f"SELECT count(*) FROM {v};" for v in views)
    read = subprocess.run(
        [str(BIN / "duckdb"), "-readonly", str(root / "catalog.duckdb"), "-c", query], capture_output=True, text=True
    )
    assert read.returncode == 0 and "Error" not in read.stderr, read.stderr
    return views


def test_gc_keeps_what_can_be_needed_and_frees_the_rest(grown_root, capsys):
    root, builds, exports = grown_root["root"], grown_root["builds"], grown_root["exports"]
    config = RetentionConfig(keep_builds=2, keep_champions=5, keep_refused=0)
    dry = collect(root, config, do_apply=False)
    assert dry.freed > 500_000 and (Path(exports["refused"]) / "model.safetensors").exists()  # nothing deleted
    assert gur(["--root", str(root), "gc"]) == 0 and "a dry run: nothing was deleted" in capsys.readouterr().out

    result = collect(root, config, do_apply=True)
    assert result.freed == dry.freed  # the dry run said what --apply frees
    # kept: both champions' weights, your own run, the run in progress, the two newest builds and their inputs
    for name in ("first", "second", "mine"):
        assert (Path(exports[name]) / "model.safetensors").exists(), name
        assert not (Path(exports[name]).parent / "checkpoints").exists()  # finished: resume state is gone
    assert (root / "train" / "0123456789abcdef" / "checkpoints").exists()
    for ref in builds[1:]:
        assert (ref_dir(root, ref) / "_manifest.json").exists()
    assert not ref_dir(root, builds[0]).exists()  # the oldest build: no kept output depends on it
    # the refused candidate: weights gone, manifest and numbers kept, never reused as a cache hit
    refused = Path(exports["refused"]).parent
    assert not (refused / "export").exists() and (refused / "summary.json").exists()
    assert json.loads((refused / "_manifest.json").read_text())["pruned"]["deleted"] == ["checkpoints", "export"]
    assert all(row["status"] != "damaged" for row in verify_outputs(root))
    assert "shards" in {v.split(".")[-1] for v in duckdb_reads_every_view(root)}
    assert gur(["--root", str(root), "rollback"]) == 0 and read_champion(root)["export"] == exports["first"]
    # a second gc finds nothing more to free, and a new build still reuses the kept per-file work
    assert collect(root, config, do_apply=True).freed == 0
    assert not (root / ".trash").exists()
    assert not StageOutput.open(root, "train", refused.name).complete  # asked for again: trained again
    assert not refused.exists()


def test_champions_past_the_window_lose_their_weights_and_gc_du_report(grown_root, capsys):
    root, exports = grown_root["root"], grown_root["exports"]
    first = exports["first"].removesuffix("/export").split(str(root) + "/")[1]
    assert "rollback 1 back" in plan(root, RetentionConfig(keep_builds=1, keep_champions=1)).keep[first]
    the_plan = plan(root, RetentionConfig(keep_builds=1, keep_champions=0, keep_refused=1))
    assert the_plan.prune[first] == ("export", "checkpoints")
    assert "keep_refused" in the_plan.keep[exports["refused"].removesuffix("/export").split(str(root) + "/")[1]]
    assert gur(["--root", str(root), "du", "--keep-builds", "1"]) == 0
    out = capsys.readouterr().out
    assert "the champion (#2)" in out and "newest shuffle build #1" in out and "gc frees" in out


def test_gur_promote_refuses_a_training_run_folder_whose_weights_gc_would_not_know_as_the_champion(grown_root, capsys):
    """A run folder has a config.json (the training's), so it passed for a model: as the champion, gc saw no
    train output's export in it and pruned the weights it points at."""
    root, exports = grown_root["root"], grown_root["exports"]
    run = Path(exports["mine"]).parent
    assert gur(["--root", str(root), "promote", str(run)]) == 1
    assert f"is a training run's folder, not a model: promote its export, {run / 'export'}" in capsys.readouterr().err
    assert read_champion(root)["export"] == exports["second"]  # nothing changed
    assert gur(["--root", str(root), "promote", str(run / "export")]) == 0
    assert "the champion" in plan(root, RetentionConfig()).keep[f"train/{run.name}"]
    refused = Path(exports["refused"]).parent
    collect(root, RetentionConfig(keep_refused=0), do_apply=True)  # its weights go, its manifest stays
    assert not (refused / "export").exists() and (refused / "_manifest.json").exists()
    assert gur(["--root", str(root), "promote", str(refused)]) == 1
    assert "its weights were deleted (gur gc): there is no model to promote" in capsys.readouterr().err


def test_a_pruned_run_trained_again_leaves_every_catalog_view_readable_meanwhile(grown_root):
    """A night with nothing new retrains a pruned candidate (same fingerprint): its folder is deleted to be
    rebuilt, and `train_metrics` named its metrics file. The catalog forgets it first, as gc does."""
    from storage.catalog import connect_catalog, refresh_catalog

    root = grown_root["root"]
    ref = train_output(root, "retrained", [], metrics=True)
    record_decision(root, {"decision": "refused", "candidate": str(ref_dir(root, ref) / "export")})
    collect(root, RetentionConfig(keep_refused=0), do_apply=True)  # weights pruned, metrics kept
    refresh_catalog(root)
    assert connect_catalog(root).execute("SELECT count(*) FROM train_metrics").fetchone()[0] == 2
    again = StageOutput.open(root, "train", ref["fingerprint"])  # what the retraining does first
    assert not again.complete and not again.dir.exists()
    assert "main.train_metrics" not in duckdb_reads_every_view(root)  # the DuckDB CLI reads every view


def test_gur_gc_and_du_keep_what_the_nights_retention_keeps_unless_told_otherwise(grown_root, tmp_path, capsys):
    """A `gur gc --apply` after a night (say, to retry its failed gc) must not prune what the night keeps."""
    root, exports = grown_root["root"], grown_root["exports"]
    (root / "nightly.toml").write_text("[retention]\nkeep_builds = 1\nkeep_refused = 0\n", encoding="utf-8")
    refused = f"train/{Path(exports['refused']).parent.name}"
    assert gur(["--root", str(root), "gc"]) == 0
    out = capsys.readouterr().out
    assert (
        f"keeping: keep_builds = 1, keep_champions = 5, keep_refused = 0 ([retention] of {root / 'nightly.toml'})"
        in out
    )
    assert gur(["--root", str(root), "du", "--keep-refused", "1"]) == 0  # a flag wins, and says so
    out = capsys.readouterr().out
    assert "keep_refused = 1 ([retention] of" in out and ", --keep-refused)" in out and f"{refused}: a newest" in out
    elsewhere = tmp_path / "night.toml"
    elsewhere.write_text("[retention]\nkeep_builds = true\n", encoding="utf-8")
    assert gur(["--root", str(root), "gc", "--config", str(elsewhere)]) == 1
    assert f"{elsewhere}: [retention] keep_builds must be a whole number" in capsys.readouterr().err
    (root / "nightly.toml").unlink()
    assert gur(["--root", str(root), "gc"]) == 0 and "(the defaults)" in capsys.readouterr().out


def test_gc_waits_for_a_running_build_and_a_build_waits_for_gc(grown_root, capsys):
    """A build in another process holds the root shared: gc gives up (or waits) and deletes nothing."""
    root = grown_root["root"]
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from storage.builds_lock import builds_lock\n"
         "with builds_lock(sys.argv[1]):\n    print('holding', flush=True); time.sleep(60)", str(root)],
        cwd=REPO, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "holding"
        listing = lambda: sorted(str(p) for p in root.rglob("*") if not p.name.endswith(".lock"))  # noqa: E731
        before = listing()
        assert gur(["--root", str(root), "gc", "--apply", "--wait", "0.5"]) == 1
        assert "a build, training or evaluation holds the data root" in capsys.readouterr().err
        assert listing() == before
    finally:
        holder.kill()
        holder.wait()
    assert gur(["--root", str(root), "gc", "--apply"]) == 0


@pytest.mark.slow
def test_a_gc_killed_mid_way_is_finished_by_a_rerun_and_the_root_verifies(grown_root, tmp_path):
    root = grown_root["root"]
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(slow_down("tasks.retention.sweep", "to_trash", 0.3), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    cmd = [sys.executable, "-m", "gur_cli", "--root", str(root), "gc", "--apply", "--keep-builds", "1"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while not (root / ".trash").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.4)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (root / ".trash").exists(), "the gc finished before the kill"
    assert all(row["status"] != "damaged" for row in verify_outputs(root))  # consistent mid-way
    duckdb_reads_every_view(root)  # the catalog left out what goes before anything moved
    assert gur(["--root", str(root), "gc", "--apply", "--keep-builds", "1"]) == 0
    assert not (root / ".trash").exists() and all(row["status"] != "damaged" for row in verify_outputs(root))
    assert not plan(root, RetentionConfig(keep_builds=1)).delete  # the rerun finished the work
    from flows.build_pairs import build_pairs

    write_day(grown_root["corpus"], 4)  # the next build uses the root as gc left it
    assert build_pairs(input_path=str(grown_root["corpus"]), root=str(root), workers=1)["shards"]
    duckdb_reads_every_view(root)


def test_reports_past_the_window_keep_their_numbers_not_their_extras(grown_root):
    """Older evaluations lose report.md, charts and per-query values; `metrics` still reads every row."""
    shared = shared_data("stackoverflow", "train.tsv")
    require_shared(shared)
    from flows.evaluate import evaluate
    from storage.catalog import connect_catalog

    root = grown_root["root"]
    reports = [
        evaluate(models=["bm25"], stackoverflow=str(shared), stsb=[], lee=False, demo_retrieval=False,
                 limit=limit, root=str(root))["metrics"]
        for limit in (60, 80, 100)
    ]  # fmt: skip
    old, newest = [ref_dir(root, r) for r in reports[:2]], ref_dir(root, reports[2])
    units = {p: json.loads((p / "_manifest.json").read_text())["upstream"][0]["path"] for p in (*old, newest)}
    the_plan = plan(root, RetentionConfig(keep_builds=1))
    for folder in old:
        assert the_plan.prune[f"evaluate/{folder.name}"] == ("report.md", "charts")
        assert the_plan.prune[units[folder]] == ("queries.parquet",)
    assert f"evaluate/{newest.name}" not in the_plan.prune and units[newest] not in the_plan.prune
    rows_before = connect_catalog(root).execute("SELECT count(*) FROM metrics").fetchone()[0]
    collect(root, RetentionConfig(keep_builds=1), do_apply=True)
    for folder in old:
        assert not (folder / "report.md").exists() and not (folder / "charts").exists()
        assert not (root / units[folder] / "queries.parquet").exists()
        assert (folder / "part-00000.parquet").exists()  # the numbers stay
    assert (newest / "report.md").exists() and (root / units[newest] / "queries.parquet").exists()
    assert all(row["status"] != "damaged" for row in verify_outputs(root))
    assert connect_catalog(root).execute("SELECT count(*) FROM metrics").fetchone()[0] == rows_before
    duckdb_reads_every_view(root)
    assert not plan(root, RetentionConfig(keep_builds=1)).prune  # nothing left to slim
    again = evaluate(models=["bm25"], stackoverflow=str(shared), stsb=[], lee=False, demo_retrieval=False,
                     limit=60, root=str(root))["metrics"]  # fmt: skip
    assert again == reports[0] and (old[0] / "report.md").exists()  # asked for again: rebuilt whole


def test_gc_keeps_the_predecessors_rollback_walks_back_to_however_many_were_rolled_back(tmp_path, capsys):
    """#1, #2, then four champions each rolled back, then #7 (its predecessor #2): the rolled-back entries are
    the newest history, but rollback walks #7 -> #2 -> #1, so those are what keep_champions keeps."""
    root = tmp_path / "data"
    runs = {name: train_output(root, name, []) for name in ("a", "b", "x1", "x2", "x3", "x4", "c")}
    exports = {name: str(ref_dir(root, ref) / "export") for name, ref in runs.items()}
    for name in ("a", "b", "x1", "x2", "x3", "x4", "c"):
        set_champion(root, {"export": exports[name], "train": runs[name]})
        record_decision(root, {"decision": "promoted", "candidate": exports[name]})
        if name.startswith("x"):
            roll_back(root)
    assert read_champion(root)["previous"] == 2
    kept = plan(root, RetentionConfig(keep_champions=2)).keep
    for name, why in (("c", "the champion (#7)"), ("b", "rollback 1 back"), ("a", "rollback 2 back")):
        assert why in kept[f"train/{Path(exports[name]).parent.name}"], name
    collect(root, RetentionConfig(keep_champions=1), do_apply=True)  # one step back is kept, not two
    assert gur(["--root", str(root), "rollback"]) == 0 and read_champion(root)["export"] == exports["b"]
    assert (Path(exports["b"]) / "model.safetensors").exists() and not Path(exports["a"]).exists()
    assert gur(["--root", str(root), "rollback"]) == 1  # #1's weights are gone: refused, nothing changed
    assert "predecessor #1 has no model" in capsys.readouterr().err
    assert read_champion(root)["export"] == exports["b"]


def _tree(folder: Path, rng, files: int) -> list[Path]:
    folder.mkdir(parents=True)
    made = []
    for i in range(files):
        made.append(folder / f"f{i}")
        made[-1].write_bytes(bytes(int(rng.integers(1, 5000))))
    return made


def test_freed_and_held_bytes_by_stage_count_each_hard_link_once_and_add_up(tmp_path):
    """Compared with the plain sums over every path on random trees of files linked across stages: a folder
    ingest links its units' shards, so deleting both frees what deleting either alone does not."""
    import numpy as np

    rng = np.random.default_rng(7)
    for trial in range(20):
        base = tmp_path / str(trial)
        stages = {s: [base / s / "kept", base / s / "gone"] for s in ("ingest", "ingest-file", "pair")}
        made = [f for folders in stages.values() for f in _tree(folders[1], rng, 5) + _tree(folders[0], rng, 3)]
        for i in range(int(rng.integers(1, 12))):  # links across stages and folders
            source, target = rng.choice(len(made), 2)
            link = Path(made[int(target)].parent) / f"link{i}"
            if not link.exists():
                os.link(made[int(source)], link)
        doomed = {s: [folders[1]] for s, folders in stages.items()}
        freed = freed_by_stage(doomed)
        assert sum(freed.values()) == freed_by([p for paths in doomed.values() for p in paths])
        held = size_by_stage(stages)
        assert sum(held.values()) == size_of([base])
    a, b = tmp_path / "x" / "ingest-file", tmp_path / "x" / "ingest"
    a.mkdir(parents=True), b.mkdir()
    (a / "shard").write_bytes(bytes(1000))
    os.link(a / "shard", b / "shard")
    assert freed_by([a]) == freed_by([b]) == 0 and freed_by_stage({"ingest": [b], "ingest-file": [a]}) == {
        "ingest": 1000,
        "ingest-file": 0,
    }


def test_retention_settings_are_checked_where_they_are_read(tmp_path):
    from tasks.nightly.config import load_nightly_config

    path = tmp_path / "nightly.toml"
    for line, error in (
        ('apply = "false"', r"\[retention\].*apply must be true or false"),
        ("keep_builds = true", r"\[retention\].*keep_builds must be a whole number"),
        ("keep_refused = 1.5", r"\[retention\].*keep_refused must be a whole number"),
        ("keep_champions = -1", r"\[retention\].*keep_champions must be a whole number >= 0"),
    ):
        path.write_text(
            f'[corpus]\npath = "docs"\n[evaluate]\nstsb = []\n[gate]\nguards = {{}}\n[retention]\n{line}\n'
        )
        with pytest.raises(ValueError, match=error):
            load_nightly_config(path)


def test_a_night_whose_gc_fails_keeps_its_decision_and_says_why(grown_root, tmp_path):
    """The gc runs after the promotion: its error is a note in the decision row, never a failed night."""
    from tasks.nightly.config import load_nightly_config
    from tasks.nightly.upkeep import retention

    root = grown_root["root"]
    path = tmp_path / "nightly.toml"
    path.write_text(
        '[corpus]\npath = "docs"\n[evaluate]\nstsb = []\n[gate]\nguards = {}\n[retention]\nkeep_builds = 1\n'
    )
    (root / ".trash").write_text("not a folder")  # where gc moves what it deletes: the move fails
    row = retention(load_nightly_config(path), root, {})
    assert row["gc"].startswith("failed: FileExistsError") and "gc_freed_bytes" not in row
    (root / ".trash").unlink()
    row = retention(load_nightly_config(path), root, {})
    assert row["gc"].startswith("deleted ") and row["gc_freed_bytes"] > 0


def test_an_unreadable_manifest_is_kept_and_named_not_a_traceback(tmp_path, capsys):
    root = tmp_path / "data"
    train_output(root, "fine", [])
    broken = root / "pair" / "00ff00ff00ff00ff"
    broken.mkdir(parents=True)
    (broken / "_manifest.json").write_text('{"stage": "pair", "files": {', encoding="utf-8")  # cut short
    kept = plan(root, RetentionConfig()).keep
    assert kept["pair/00ff00ff00ff00ff"].startswith("damaged, left for you to look at (gur verify)")
    assert gur(["--root", str(root), "gc", "--apply"]) == 0 and broken.exists()
    assert gur(["--root", str(root), "du"]) == 0 and "pair/00ff00ff00ff00ff: damaged" in capsys.readouterr().out


@pytest.mark.slow
def test_a_build_killed_mid_way_keeps_what_it_finished_and_gc_frees_what_was_abandoned(
    grown_root, tmp_path, prefect_api_url
):
    """A build-pairs killed in its shuffle: its finished ingest, split and pair outputs stay for the rerun, its
    unfinished shuffle stays (it resumes), also after another corpus has built since; an unfinished output older
    than the newest build goes."""
    root, corpus = grown_root["root"], grown_root["corpus"]
    stale = root / "split" / "00000000deadbeef"  # a run abandoned before the newest build finished
    (stale / "_tmp").mkdir(parents=True)
    past = time.time() - 86400
    for path in (stale / "_tmp", stale):
        os.utime(path, (past, past))
    write_day(corpus, 4)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(slow_down("tasks.shuffle.phases", "dedup_partition", 60), encoding="utf-8")
    # on the tests' Prefect server: what is killed is the build, not a server of its own
    env = gur_env(site, api=prefect_api_url)
    before = {p.name for p in (root / "shuffle").iterdir()}
    cmd = [sys.executable, "-m", "gur_cli", "--root", str(root), "build-pairs", str(corpus), "--workers", "1"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    deadline, started = time.monotonic() + 120, []
    while not started and time.monotonic() < deadline and proc.poll() is None:
        started = [p for p in (root / "shuffle").iterdir() if p.name not in before]
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert started and not (started[0] / "_manifest.json").exists(), "the build did not reach its shuffle"
    finished = {f"{s}/{p.name}" for s in ("ingest", "split", "pair") for p in (root / s).iterdir()}
    from flows.build_pairs import build_pairs

    other = tmp_path / "other"  # another corpus builds meanwhile: the killed build is still this corpus's
    other.mkdir()
    write_day(other, 9)
    assert build_pairs(input_path=str(other), root=str(root), workers=1)["shards"]
    the_plan = plan(root, RetentionConfig(keep_builds=1))
    newest = [p for p in finished if "part of a build that did not finish" in the_plan.keep.get(p, "")]
    assert {p.split("/")[0] for p in newest} == {"ingest", "split", "pair"}
    assert the_plan.keep[f"shuffle/{started[0].name}"].startswith("incomplete")
    assert "abandoned" in the_plan.delete["split/00000000deadbeef"]
    collect(root, RetentionConfig(keep_builds=1), do_apply=True)
    assert not stale.exists() and all((root / p / "_manifest.json").exists() for p in newest)
    assert build_pairs(input_path=str(corpus), root=str(root), workers=1)["shards"]["path"] == (
        f"shuffle/{started[0].name}"
    )  # the rerun finishes the same build from what gc kept


def test_a_stale_folder_of_the_same_name_does_not_keep_another_folders_old_file_units(tmp_path):
    """Per-file units belong to the folders of their source name: one built long ago must not make every newer
    unit look like part of a build that did not finish."""
    from flows.build_pairs import build_pairs

    stale, live, root = tmp_path / "old" / "docs", tmp_path / "new" / "docs", tmp_path / "data"
    for folder in (stale, live):
        folder.mkdir(parents=True)
    write_day(stale, 7)
    build_pairs(input_path=str(stale), root=str(root), workers=1)
    write_day(live, 1)
    first = build_pairs(input_path=str(live), root=str(root), workers=1)["documents"]
    (live / "day1.jsonl").write_text((live / "day1.jsonl").read_text().replace("river", "brook"), encoding="utf-8")
    build_pairs(input_path=str(live), root=str(root), workers=1)
    manifest = json.loads((ref_dir(root, first) / "_manifest.json").read_text())
    (old_unit,) = [f"ingest-file/{f['unit']}" for f in manifest["corpus_files"]]  # day1.jsonl before the edit
    the_plan = plan(root, RetentionConfig(keep_builds=1))
    assert first["path"] in the_plan.delete and old_unit in the_plan.delete, the_plan.keep.get(old_unit)


def test_the_work_of_a_build_that_never_finishes_goes_once_more_than_keep_builds_builds_finished_since(
    grown_root, tmp_path
):
    """A corpus killed once and never built again (or rerun with other settings) must not keep its work, or the
    unfinished outputs of other runs, forever."""
    from flows.build_pairs import build_pairs

    root = grown_root["root"]
    unfinished = root / "split" / "00000000cafe0000"  # killed a moment ago, first stage of a new corpus
    (unfinished / "_tmp").mkdir(parents=True)
    other = tmp_path / "other"
    other.mkdir()
    for day, gone in ((7, False), (8, True)):
        write_day(other, day)
        build_pairs(input_path=str(other), root=str(root), workers=1)
        the_plan = plan(root, RetentionConfig(keep_builds=1))
        assert (unfinished.relative_to(root).as_posix() in the_plan.delete) == gone, the_plan.keep.get(
            "split/00000000cafe0000"
        )
    assert "more than 1 builds finished since: abandoned" in the_plan.delete["split/00000000cafe0000"]


def test_gc_keeps_what_a_rerun_reuses_a_run_resumes_from_and_search_embeds_with(grown_root):
    """The build a rerun just reused (the catalog's `main`), however old; the inputs and the starting model of a
    training run that was interrupted; the model the active embeddings were made with."""
    from flows.build_pairs import build_pairs
    from storage.catalog import connect_catalog
    from storage.layout import record_path

    root, builds, exports, corpus = (
        grown_root["root"],
        grown_root["builds"],
        grown_root["exports"],
        grown_root["corpus"],
    )
    for day in (2, 3):  # the folder as it was on day 1: the rerun reuses the oldest build
        (corpus / f"day{day}.jsonl").rename(corpus.parent / f"day{day}.jsonl")
    assert build_pairs(input_path=str(corpus), root=str(root), workers=1)["shards"] == builds[0]
    # a run interrupted by Ctrl-C: its config.json and checkpoints, no manifest; it starts from a refused model.
    # The trainer's launch file names absolute paths: its shards as written before the root was moved here
    run = root / "train" / "00000000000000aa"
    (run / "checkpoints" / "step-00100").mkdir(parents=True)
    shards_then = str(ref_dir(Path("/where/the/root/was"), builds[1]))
    (run / "config.json").write_text(
        json.dumps({"shards": shards_then, "init_from": exports["refused"]}), encoding="utf-8"
    )
    late = train_output(root, "late-refused", [builds[2]])  # refused after, so keep_refused=1 keeps only it
    record_decision(root, {"decision": "refused", "candidate": str(ref_dir(root, late) / "export")})
    embed = StageOutput.open(root, "embed", "00000000000000ee")
    embed.dir.mkdir(parents=True, exist_ok=True)
    (embed.dir / "part-00000.parquet").write_bytes(b"vectors")
    # the model named relative to the root, as the embed task records it
    made = embed.finish(
        code_version="test", config={"model_path": record_path(root, exports["mine"])}, inputs={},
        upstream=[builds[2]], tables={}, rows={}, drops={},
    )  # fmt: skip
    (root / "embed" / "active.json").write_text(json.dumps({"path": made["path"]}), encoding="utf-8")
    indexes = []
    for name, upstream in (("0000000000000a01", made), ("0000000000000a02", builds[2])):  # the second is newer
        index = StageOutput.open(root, "embed-index", name)
        index.dir.mkdir(parents=True, exist_ok=True)
        (index.dir / "index.bin").write_bytes(b"graph")
        indexes.append(
            index.finish(code_version="t", config={}, inputs={}, upstream=[upstream], tables={}, rows={}, drops={})
        )
    refused_run, mine_run = (f"train/{Path(exports[n]).parent.name}" for n in ("refused", "mine"))
    the_plan = plan(root, RetentionConfig(keep_builds=1, keep_refused=0))
    assert "shown in the catalog's `main`" in the_plan.keep[builds[0]["path"]]
    assert the_plan.keep[builds[1]["path"]] == "shards of train/00000000000000aa, a run that resumes"
    assert the_plan.keep[refused_run] == "init_from of train/00000000000000aa, a run that resumes"
    assert "active embeddings were made with" in the_plan.keep[mine_run]
    assert the_plan.keep[indexes[0]["path"]] == "a search index of the active embeddings"  # not the newest
    collect(root, RetentionConfig(keep_builds=1, keep_refused=0), do_apply=True)
    assert (Path(exports["refused"]) / "model.safetensors").exists() and (run / "checkpoints").exists()
    assert (Path(exports["mine"]) / "model.safetensors").exists()
    shown = connect_catalog(root).execute("SELECT output FROM builds WHERE in_main AND kind = 'build'").fetchall()
    assert shown == [(builds[0]["path"],)]  # `main` still shows the build the rerun reused


def test_a_warm_started_keywords_build_keeps_the_fit_it_started_from_so_a_rerun_reuses_it(tmp_path):
    from flows.mine_keywords import mine_keywords

    corpus, root = tmp_path / "corpus", tmp_path / "data"
    corpus.mkdir()
    fits = []
    for day in (1, 2, 3):
        write_day(corpus, day)
        fits.append(mine_keywords(input_path=str(corpus), k=2, n_iters=3, warm_start=True, root=str(root)))
    manifest = json.loads((ref_dir(root, fits[2]) / "_manifest.json").read_text())
    assert manifest["convergence"]["warm_start_from"] == fits[1]["fingerprint"]
    the_plan = plan(root, RetentionConfig(keep_builds=1))
    assert the_plan.keep[fits[1]["path"]] == f"the fit {fits[2]['path']} warm-started from"
    assert fits[0]["path"] in the_plan.delete  # an older build's prior: no rerun warm-starts from it again
    for _ in range(2):  # the kept prior, its inputs gone, is still its corpus's (not a build of "?") and no root
        collect(root, RetentionConfig(keep_builds=1), do_apply=True)
        assert sorted(p.name for p in (root / "keywords").iterdir()) == sorted(f["fingerprint"] for f in fits[1:])
    again = mine_keywords(input_path=str(corpus), k=2, n_iters=3, warm_start=True, root=str(root))
    assert again == fits[2]  # reused, not fitted again from a cold start


def test_a_candidate_a_night_failed_on_is_judged_so_its_weights_can_go(tmp_path):
    """The night trained a candidate, then its evaluation stopped it: the `failed` row names the candidate,
    so gc counts it judged (kept as the newest of keep_refused, else pruned), not a run of your own forever."""
    root = tmp_path / "data"
    runs = {name: train_output(root, name, []) for name in ("failed", "refused")}
    exports = {name: str(ref_dir(root, ref) / "export") for name, ref in runs.items()}
    record_decision(root, {"decision": "failed", "reason": "the night stopped", "candidate": exports["failed"]})
    assert "keep_refused" in plan(root, RetentionConfig(keep_refused=1)).keep[runs["failed"]["path"]]
    record_decision(root, {"decision": "refused", "candidate": exports["refused"]})
    the_plan = plan(root, RetentionConfig(keep_refused=1))
    assert the_plan.prune[runs["failed"]["path"]] == ("export", "checkpoints")
    assert "keep_refused" in the_plan.keep[runs["refused"]["path"]]
    # a night that fails after promoting names the new champion: past the window it goes like any old
    # champion, never taking the refused candidate's keep_refused slot
    promoted = train_output(root, "promoted", [])
    export = str(ref_dir(root, promoted) / "export")
    record_decision(root, {"decision": "promoted", "candidate": export})
    record_decision(root, {"decision": "failed", "reason": "the night stopped", "candidate": export})
    assert (
        "keep_refused" in plan(root, RetentionConfig(keep_refused=1, keep_champions=0)).keep[runs["refused"]["path"]]
    )


def test_an_older_prepared_sts_model_folder_is_superseded_by_the_newer_one(tmp_path):
    """`sts-llm/` holds converted model folders (GBs at base size): an upgraded package converts again."""
    root = tmp_path / "data"
    made = {}
    for key, name in (("old", "smollm2"), ("mpnet", "mpnet"), ("new", "smollm2")):
        out = StageOutput.open(root, "sts-llm", hashlib.blake2b(key.encode(), digest_size=8).hexdigest())
        (out.dir / "model").mkdir(parents=True)
        (out.dir / "model" / "model.safetensors").write_bytes(bytes(10_000))
        made[key] = out.finish(
            code_version="test", config={"name": name}, inputs={}, upstream=[], tables={}, rows={}, drops={}
        )["path"]
        time.sleep(0.01)  # finished one after another
    the_plan = plan(root, RetentionConfig())
    assert "superseded" in the_plan.delete[made["old"]]
    assert "newest prepared smollm2" in the_plan.keep[made["new"]] and made["mpnet"] in the_plan.keep
    folder = root / made["old"]
    whole = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())  # the model and its manifest
    assert collect(root, RetentionConfig(), do_apply=True).freed == whole > 10_000 and not folder.exists()
