"""`open_table("promotions")` reads rows written before a column existed, with that column null, like the view."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq


def test_older_promotion_rows_read_with_nulls_in_newer_columns(tmp_path):
    from storage.catalog import refresh_catalog
    from storage.champion import record_decision
    from storage.open_table import open_table

    old = record_decision(tmp_path, {"decision": "promoted", "reason": "an older night"})
    # As an older release wrote it: without the columns added since.
    pq.write_table(pa.table({"decision": ["promoted"], "reason": ["an older night"]}), old)
    record_decision(tmp_path, {"decision": "refused", "reason": "tonight", "files_new": 2, "documents_new": 40})
    refresh_catalog(tmp_path)
    rows = open_table("promotions", tmp_path).sort("reason").collect().to_dicts()
    assert [r["decision"] for r in rows] == ["promoted", "refused"]
    assert rows[0]["files_new"] is None and (rows[1]["files_new"], rows[1]["documents_new"]) == (2, 40)
