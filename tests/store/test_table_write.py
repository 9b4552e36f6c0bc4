"""TableWrite.write's `at`: a writer's share of rows written by position (the driver-local writer
threads' way) lands exactly as the same rows taken out first would."""

import numpy as np
import pyarrow as pa
import pytest

from dbt_paimon.store import FileStoreTable

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])


def _placed(table):
    """Every row with the (partition, bucket) it was written to, and the table's files' row counts."""
    out, counts = [], []
    reader = table.new_read()
    for split in table.plan().splits:
        rows = reader.read_split(split)
        counts.append(sum(f.row_count for f in split.files))
        out += [(r["id"], r["dt"], r["v"], split.bucket) for r in rows.to_pylist()]
    return sorted(out), sorted(counts)


@pytest.mark.parametrize("buckets", ["given per row", "hashed by the table (bucket = 3)"])
def test_rows_written_by_position_land_as_the_rows_taken_out(warehouse, buckets):
    ids = np.arange(40, dtype=np.int64)[::-1]  # not in key order
    rows = pa.table({"id": ids, "dt": [f"d{i % 3}" for i in ids], "v": [f"v{i}" for i in ids]})
    at = np.flatnonzero(ids % 4 != 1)[::-1].copy()  # a share, in no particular order
    given = buckets == "given per row"
    options = {"bucket": "2"} if given else {"bucket": "3"}
    per_row = pa.array((ids % 2).astype(np.int32)) if given else None
    by_position = FileStoreTable.create(f"{warehouse}/a", SCHEMA, ["id", "dt"], ["dt"], options)
    w = by_position.new_write()
    w.write(rows, per_row, pa.array(np.zeros(len(ids), np.int8)), at=at)
    w.commit()
    taken_out = FileStoreTable.create(f"{warehouse}/b", SCHEMA, ["id", "dt"], ["dt"], options)
    w = taken_out.new_write()
    w.write(rows.take(pa.array(at)), per_row.take(pa.array(at)) if given else None)
    w.commit()
    assert _placed(by_position) == _placed(taken_out)
    assert len(_placed(by_position)[0]) == len(at)
