"""Atomic shard writing and resume markers.

A shard is written under `_tmp/` (outside every reader glob), renamed into place, and only
then marked done with an empty `_done/NNNNN` file. A shard is finished iff its marker exists.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from storage.atomic import atomic_path, atomic_write_text
from storage.layout import DONE_DIR, TMP_DIR, done_marker, shard_name

ROW_GROUP_SIZE = 50_000


def read_shard(path: Path | str, columns: list[str] | None = None) -> pa.Table:
    """One Parquet file as a table. `pq.read_table` goes through the dataset layer, a fixed cost a file even
    for a tiny shard; a night reads every file unit's shard of a folder, so this reads the file directly
    (the same table, a fraction of the cost: the results log, docs/results/, shards read without the dataset
    layer)."""
    with pq.ParquetFile(path) as f:
        return f.read(columns=columns)


def write_shard(
    out_dir: Path,
    index: int,
    table: pa.Table,
    table_name: str = "",
    row_group_size: int = ROW_GROUP_SIZE,
    dictionary: bool | list[str] = True,
    compression: str = "zstd",
    statistics: bool | list[str] = True,
) -> Path:
    """Write `table` as shard `index` atomically, then its done marker; returns the final path.

    `table_name` puts side tables (e.g. `rejects`) in their own subfolder with their own markers.
    """
    final_dir = out_dir / table_name if table_name else out_dir
    final_dir.mkdir(parents=True, exist_ok=True)
    final = final_dir / shard_name(index)
    # The temporary goes to `_tmp/`, which a resumed run sweeps (a SIGKILL skips atomic_path's cleanup).
    with atomic_path(final, tmp_dir=out_dir / TMP_DIR) as tmp:
        # No timestamps or writer-specific metadata: the same table gives the same bytes.
        if isinstance(dictionary, list):  # dictionary-encoding unique text only costs time
            dictionary = [c for c in dictionary if c in table.column_names]
        if isinstance(statistics, list):
            statistics = [c for c in statistics if c in table.column_names]
        pq.write_table(
            table,
            tmp,
            row_group_size=row_group_size,
            compression=compression,
            write_statistics=statistics,
            use_dictionary=dictionary,
        )
    marker = done_marker(out_dir, index, table_name)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    return final


def shard_done(out_dir: Path, index: int, table_name: str = "") -> bool:
    return done_marker(out_dir, index, table_name).exists()


def sweep_temporaries(out_dir: Path) -> int:
    """Delete leftovers of a crashed run; returns how many files were removed."""
    tmp_dir = out_dir / TMP_DIR
    if not tmp_dir.exists():
        return 0
    count = sum(1 for p in tmp_dir.iterdir())
    shutil.rmtree(tmp_dir)
    return count


def finished_shards(out_dir: Path, table_name: str = "") -> list[Path]:
    """Final shard paths of `table_name` whose markers exist, in shard order."""
    base = out_dir / table_name if table_name else out_dir
    done = out_dir / DONE_DIR
    if not done.exists():
        return []
    prefix = f"{table_name}-" if table_name else ""
    names = [m.name[len(prefix) :] for m in done.iterdir() if m.name.startswith(prefix)]
    indices = sorted(int(n) for n in names if n.isdigit())
    return [base / shard_name(i) for i in indices]


STATS_DIR = "_stats"


def write_shard_stats(out_dir: Path, index: int, stats: dict[str, int], table_name: str = "") -> None:
    """Per-shard counts, written before the shard's marker so a resumed run can still sum them."""
    import json

    folder = out_dir / STATS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{table_name}-{index:05d}" if table_name else f"{index:05d}"
    atomic_write_text(folder / f"{name}.json", json.dumps(stats, sort_keys=True))


def sum_shard_stats(out_dir: Path) -> dict[str, int]:
    """Sum every shard's counts (keys with the same name add up)."""
    import json

    total: dict[str, int] = {}
    try:
        names = sorted(e.name for e in os.scandir(out_dir / STATS_DIR) if e.name.endswith(".json"))
    except FileNotFoundError:
        return {}
    folder = os.path.join(out_dir, STATS_DIR)
    for name in names:  # plain os calls: a night sums every file unit's shards
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for key, value in json.load(f).items():
                total[key] = total.get(key, 0) + int(value)
    return dict(sorted(total.items()))


def link_shard(
    source_dir: Path, source_index: int, out_dir: Path, index: int, table_name: str = "", fresh: bool = False
) -> Path:
    """Shard `source_index` of another output becomes shard `index` here (a hard link, see `atomic_link`),
    with its counts when it has them, then its marker: for work whose result is already on disk. `fresh`:
    `out_dir` was emptied for this run and is rebuilt from the start if interrupted (a folder's assembly),
    so nothing is replaced and a plain link will do (half the calls, for every file unit, every night)."""
    from storage.atomic import atomic_link, link_or_copy
    from storage.manifest import note_linked

    base, final_dir = (source_dir / table_name, out_dir / table_name) if table_name else (source_dir, out_dir)
    tmp = out_dir / TMP_DIR
    link = link_or_copy if fresh else lambda src, dst: atomic_link(src, dst, tmp_dir=tmp)
    source = base / shard_name(source_index)
    final = final_dir / shard_name(index)
    link(source, final)
    note_linked(source_dir, source)  # the new output's inventory takes its hash from the source's manifest
    prefix = f"{table_name}-" if table_name else ""
    stats = os.path.join(source_dir, STATS_DIR, f"{prefix}{source_index:05d}.json")
    if os.path.exists(stats):
        link(stats, os.path.join(out_dir, STATS_DIR, f"{prefix}{index:05d}.json"))
    marker = done_marker(out_dir, index, table_name)
    try:
        open(marker, "ab").close()
    except FileNotFoundError:
        marker.parent.mkdir(parents=True, exist_ok=True)
        open(marker, "ab").close()
    return final
