"""A corpus folder as users fill it: every file read by its own format, and each night's work in proportion
to what is new, with the shards of every night equal to a cold build of the same folder."""

from __future__ import annotations

import logging
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from samples.pair_corpus import part_hashes  # noqa: E402
from storage.manifest import read_manifest  # noqa: E402
from tasks.ingest.documents import IngestConfig  # noqa: E402
from tasks.ingest.readers import ReaderConfig  # noqa: E402
from tests.helpers.corpus_folder import docs, jsonl_bytes, write_mixed_folder  # noqa: E402

CONFIG = IngestConfig(ReaderConfig(), source_name="corpus")


def ingest_folder(folder: Path, root: Path, config: IngestConfig = CONFIG) -> tuple[Path, dict]:
    """The real ingest task's body, outside a flow: (output folder, manifest)."""
    from tasks.ingest.task import ingest

    ref = ingest.fn(str(folder), config, str(root), workers=1)
    ref = ref.data if hasattr(ref, "data") else ref  # a reused output comes back as a Cached state
    return root / ref["path"], read_manifest(root / ref["path"])


def table(folder: Path, name: str = "") -> pa.Table:
    base = folder / name if name else folder
    return pa.concat_tables(pq.read_table(p) for p in sorted(base.glob("part-*.parquet")))


def test_every_format_in_one_folder_is_the_union_of_each_file_read_alone(tmp_path):
    records = write_mixed_folder(tmp_path / "corpus")
    out, manifest = ingest_folder(tmp_path / "corpus", tmp_path / "root")
    documents, rejects = table(out), table(out, "rejects")

    # Each file alone (in a folder of its own, at the same relative path) gives that file's documents.
    alone: dict[str, list[tuple]] = {}
    for rel in records:
        single = tmp_path / "alone" / rel.replace("/", "_")
        (single / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tmp_path / "corpus" / rel, single / rel)
        folder, _ = ingest_folder(single, tmp_path / "root-alone")
        rows = table(folder).select(["doc_id", "title", "text", "location"]).to_pylist()
        alone[rel] = [tuple(r.values()) for r in rows]
    got = [tuple(r.values()) for r in documents.select(["doc_id", "title", "text", "location"]).to_pylist()]
    union = [row for rel in sorted(alone) for row in alone[rel]]
    copies = [row for row in alone["z_copy.jsonl"]]
    assert len(copies) == 2 and all(row[0] in {r[0] for r in alone["a.jsonl"]} for row in copies)
    assert got == [row for row in union if row not in copies]  # in path order, cross-file duplicates dropped
    assert len(set(documents["doc_id"].to_pylist())) == documents.num_rows

    # Every format was read as its own: structured files give one document per record, text files one each.
    per_file = {f["path"]: f for f in manifest["corpus_files"]}
    assert {rel: f["records"] for rel, f in per_file.items()} == records
    assert per_file["f.xml"]["format"] == "mediawiki" and per_file["e.parquet"]["format"] == "parquet"
    assert per_file["i.csv.zst"]["format"] == "csv" and per_file["h.tsv.bz2"]["format"] == "tsv"
    assert per_file["b/wiki2txt-output.txt"]["format"] == "jsonl" and per_file["notes/readme.txt"]["format"] == "text"
    for rel in ("a.jsonl", "b/wiki2txt-output.txt", "c.csv", "d.tsv", "e.parquet", "f.xml", "g.jsonl.gz"):
        assert per_file[rel]["documents"] == 6, rel
    assert per_file["z_copy.jsonl"] | {"documents": 0, "duplicates_across_files": 2} == per_file["z_copy.jsonl"]

    # A TSV without the text column is one reject naming the file, never a document.
    by_reason = Counter(rejects["reason"].to_pylist())
    assert by_reason == {"duplicate_document": 2, "missing_field": 1, "hidden_file": 1}
    missing = rejects.filter(pa.compute.equal(rejects["reason"], "missing_field")).to_pylist()[0]
    assert missing["location"] == "no_text_column.tsv:1" and "no_text_column.tsv" in missing["detail"]
    assert not any("no_text_column" in loc for loc in documents["location"].to_pylist())

    # Records in = documents + rejects, per file and in total, in the manifest.
    assert all(f["records"] == f["documents"] + f["rejects"] for f in per_file.values())
    assert manifest["records"] == sum(records.values()) == documents.num_rows + rejects.num_rows
    assert manifest["rows"] == {"documents": documents.num_rows, "rejects": rejects.num_rows}
    assert manifest["drops"] == dict(sorted(by_reason.items()))


def test_ids_from_two_files_do_not_collide_and_a_forced_format_applies_to_every_file(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    # Two nights of exports whose own `id` columns both start at 0: different records, both kept.
    (folder / "day1.jsonl").write_bytes(jsonl_bytes([{"id": 0, "text": "First night. A sentence."}]))
    (folder / "day2.jsonl").write_bytes(jsonl_bytes([{"id": 0, "text": "Second night. Another one."}]))
    (folder / "day3.log").write_bytes(jsonl_bytes([{"id": 0, "text": "Named like a log file."}]))
    out, _ = ingest_folder(folder, tmp_path / "root")
    documents = table(out)
    assert documents.num_rows == 3 and len(set(documents["doc_id"].to_pylist())) == 3
    assert documents["location"].to_pylist() == ["day1.jsonl:1", "day2.jsonl:1", "day3.log:1"]
    # `--format textdir`: every file is one plain-text document, whatever its name or bytes.
    forced = IngestConfig(ReaderConfig(format="textdir"), source_name="corpus")
    out, manifest = ingest_folder(folder, tmp_path / "root", forced)
    assert table(out).num_rows == 3 and {f["format"] for f in manifest["corpus_files"]} == {"text"}
    assert table(out)["text"].to_pylist()[0].startswith('{"id": 0')


def test_a_folder_check_names_the_file_when_no_structured_file_has_the_field(tmp_path):
    from tasks.ingest.checks import check_corpus
    from tasks.ingest.readers import CorpusError

    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "day1.tsv").write_text("id\ttitle\tbody\n1\tA title\tSome text.\n")
    (folder / "notes.txt").write_text("Plain text is one document.")
    with pytest.raises(CorpusError, match=r"no column 'text' in .*day1.tsv \(line 1\).*try --text-field body"):
        check_corpus(folder, ReaderConfig())
    check_corpus(folder, ReaderConfig(text_field="body"))  # one file has it: the others become rejects


@pytest.mark.usefixtures("prefect_harness")
def test_three_nights_add_change_delete_equal_a_cold_build_and_do_only_the_new_work(tmp_path, caplog, request):
    from flows.build_pairs import build_pairs

    folder = tmp_path / "corpus"
    folder.mkdir()
    day = {n: jsonl_bytes(docs(40, n)) for n in range(5)}
    for n in (0, 1, 2):
        (folder / f"day{n}.jsonl").write_bytes(day[n])
    options = dict(workers=1, docs_per_shard=25, rows_per_shard=400, source_name="corpus")
    root = tmp_path / "nightly"
    build_pairs(input_path=str(folder), root=str(root), **options)

    nights = [
        ("add", lambda: (folder / "day3.jsonl").write_bytes(day[3]), 1),
        ("change", lambda: (folder / "day1.jsonl").write_bytes(day[4]), 1),
        ("delete", lambda: (folder / "day0.jsonl").unlink(), 0),
    ]
    # The stages log through Prefect's run loggers, which propagate to the root (caplog's handler) only once
    # something in the session has set that up: listen on them directly, so the test passes run alone too.
    prefect_log = logging.getLogger("prefect")
    prefect_log.addHandler(caplog.handler)
    request.addfinalizer(lambda: prefect_log.removeHandler(caplog.handler))
    for i, (what, change, files_read) in enumerate(nights):
        change()
        caplog.clear()
        refs = build_pairs(input_path=str(folder), root=str(root), **options)
        cold_root = tmp_path / f"cold-{i}"
        cold = build_pairs(input_path=str(folder), root=str(cold_root), **options)
        assert refs == cold, what  # the same fingerprints
        assert part_hashes(root, refs) == part_hashes(cold_root, cold), what  # and the same bytes

        ingest = read_manifest(root / refs["documents"]["path"])
        assert ingest["file_work"] == {"read": files_read, "reused": len(ingest["corpus_files"]) - files_read}, what
        delta = ingest["delta"]
        expected = {"add": (1, 0, 0), "change": (0, 1, 0), "delete": (0, 0, 1)}[what]
        assert (delta["files_new"], delta["files_changed"], delta["files_removed"]) == expected, what
        if what == "delete":
            assert delta["documents_removed"] == 40 and delta["documents_new"] == 0
        else:
            assert delta["documents_new"] == 40
        # Split and pair computed only the new file's shards (40 documents at 25 a shard: 2), linked the rest.
        for stage in ("sentences", "pairs"):
            work = read_manifest(root / refs[stage]["path"])["shard_work"]
            assert work["computed"] == 2 * files_read, (what, stage, work)
            assert work["linked"] == 2 * len(ingest["corpus_files"]) - work["computed"], (what, stage, work)
        lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ingest: ")]
        assert any(f"{files_read} read," in line for line in lines), lines


def test_a_corrupt_file_is_one_reject_naming_it_and_the_others_are_read(tmp_path):
    import gzip

    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "good.jsonl").write_bytes(jsonl_bytes(docs(3, 1)))
    whole = gzip.compress(jsonl_bytes(docs(50, 2)))
    (folder / "truncated.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    (folder / "not-gzip.txt.gz").write_bytes(b"\x1f\x8bthis is not a gzip stream")
    out, manifest = ingest_folder(folder, tmp_path / "root")
    rejects = table(out, "rejects").to_pylist()
    unreadable = {r["location"].split(":")[0]: r for r in rejects if r["reason"] == "unreadable_file"}
    assert set(unreadable) == {"truncated.jsonl.gz", "not-gzip.txt.gz"}
    assert all(name in r["detail"] for name, r in unreadable.items())
    assert table(out).num_rows >= 3 and manifest["records"] == table(out).num_rows + len(rejects)
    # the reject is where reading stopped: the line after the last record read from the truncated file
    read = [loc for loc in table(out).column("location").to_pylist() if loc.startswith("truncated.jsonl.gz:")]
    assert read and unreadable["truncated.jsonl.gz"]["location"] == f"truncated.jsonl.gz:{len(read) + 1}"
    assert unreadable["not-gzip.txt.gz"]["location"] == "not-gzip.txt.gz:1"


def _output_bytes(out: Path) -> dict[str, bytes]:
    """Every file of an ingest output but its manifest: shards, rejects, counts, markers, `units.parquet`."""
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name != "_manifest.json"
    }


def test_a_night_starts_after_the_unchanged_leading_files_and_equals_a_cold_build(tmp_path, monkeypatch):
    import tasks.ingest.folder as folder_module

    folder = tmp_path / "corpus"
    folder.mkdir()
    a, b, d = docs(30, 1, "A"), docs(30, 2, "B"), docs(30, 4, "D")
    (folder / "a.jsonl").write_bytes(jsonl_bytes(a))
    (folder / "b.jsonl").write_bytes(jsonl_bytes(b + [a[0]]))  # a copy of a's: its reject comes from units.parquet
    (folder / "c-dup.jsonl").write_bytes(jsonl_bytes(docs(30, 3, "C")))
    (folder / "d.jsonl").write_bytes(jsonl_bytes(d))
    config = IngestConfig(ReaderConfig(), source_name="corpus", docs_per_shard=20)
    root = tmp_path / "nightly"
    ingest_folder(folder, root, config)

    read = []
    real = folder_module.read_shard

    def counting(path, columns=None):
        read.append(Path(path).parent.name)  # the unit folder a shard was read from
        return real(path, columns)

    monkeypatch.setattr(folder_module, "read_shard", counting)
    (folder / "b2.jsonl").write_bytes(jsonl_bytes(docs(30, 5, "E") + [d[0]]))  # sorts after b: b, c, d go again
    out, manifest = ingest_folder(folder, root, config)
    units = {f["path"]: f["unit"] for f in manifest["corpus_files"]}
    # a's and b's ids came from the previous night's units.parquet; the files after the new one are read again.
    assert units["a.jsonl"] not in read and units["b.jsonl"] not in read
    assert {units[p] for p in ("b2.jsonl", "c-dup.jsonl", "d.jsonl")} <= set(read)
    assert manifest["drops"]["duplicate_document"] == 2  # b's copy of a[0], d's of d[0] (b2 holds it first)

    monkeypatch.setattr(folder_module, "read_shard", real)
    cold_out, cold = ingest_folder(folder, tmp_path / "cold", config)
    assert out.name == cold_out.name
    assert _output_bytes(out) == _output_bytes(cold_out)
    for key in ("rows", "drops", "corpus_files"):
        assert manifest[key] == cold[key], key
