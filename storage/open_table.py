"""`open_table`: a catalog view as a polars LazyFrame, over the same Parquet files.

    >>> from storage.open_table import open_table
    >>> pairs = open_table("pairs")                        # main's build; `build="wiki_1a2b3c4d"` for another
    >>> pairs.group_by("lcs").len().sort("len", descending=True).head(5).collect()

Nothing is read until `.collect()` (or `.sink_parquet(...)`), so filters and column choices reach
the Parquet scan. The files come from the catalog's `catalog_views` table, written with the views:
the frame and the DuckDB view of the same name read the same build.
"""

from __future__ import annotations

import os
from glob import glob as expand

import polars as pl

from storage.catalog import catalog_files
from storage.catalog_sql import DERIVED, METRICS_KEY
from storage.layout import data_root


def open_table(name: str, root: str | os.PathLike | None = None, build: str | None = None) -> pl.LazyFrame:
    """The rows of catalog view `name` of `main` (`build=None`) or of schema `build` (see `SELECT * FROM builds`).

    Raises KeyError naming the known views when there is no such view.
    """
    base = data_root(root)
    if name in DERIVED:  # metrics_latest: the newest row per key, as the view computes it
        metrics = open_table("metrics", base, build)
        return metrics.sort("created_at", descending=True, nulls_last=True).unique(
            subset=list(METRICS_KEY), keep="first", maintain_order=True
        )
    globs, dedup, columns = catalog_files(base, name, build)
    if columns:
        frames = [pl.scan_parquet(glob) for glob in globs]
    else:  # file by file: files written before a column existed (promotions) read it as null, as the view does
        frames = [pl.scan_parquet(path) for glob in globs for path in sorted(expand(str(glob)))] or [
            pl.scan_parquet(glob) for glob in globs
        ]
    if columns:  # train_metrics: each run's rows carry the run's fingerprint, method and input, as in the view
        frames = [
            frame.select(*[pl.lit(v, pl.String).alias(k) for k, v in constant.items()], pl.all())
            for frame, constant in zip(frames, columns, strict=True)
        ]
    frame = frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed")
    return frame.unique(maintain_order=True) if dedup else frame
