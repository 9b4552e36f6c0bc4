"""A batch read of a first-row table leaves out level-0 files, as Java Paimon and pypaimon read it:
at the APPEND snapshot of an upsert (before its COMPACT snapshot), by time travel and when the
latest snapshot is an APPEND nothing compacted yet; through the `paimon` Spark source and the store."""

import pyarrow as pa

from dbt_paimon.engine import upsert
from dbt_paimon.store.table import FileStoreTable

from .helpers import by_key, frame, pypaimon_rows, spark_rows
from .model import UpsertModel, random_batches

OPTIONS = {"merge-engine": "first-row", "dynamic-bucket.target-row-num": "4"}


def _store_rows(path, snapshot_id=None):
    return by_key(FileStoreTable.open(path).to_arrow(snapshot_id=snapshot_id).to_pylist())


def test_first_row_batch_read_skips_level0_at_append_snapshots(spark, warehouse, execution):
    path = f"{warehouse}/db.db/first_row"
    model = UpsertModel(["id"], ["dt"], engine="first-row")
    want = {}  # snapshot id -> what a batch read of it returns
    for i, batch in enumerate(random_batches(seed=31, batches=3, size=20, key_space=30)):
        before = model.sorted_rows()
        model.apply(batch)
        result = upsert(frame(spark, batch), path, primary_keys="id", partition_keys="dt", options=OPTIONS,
                        execution=execution)
        table = FileStoreTable.open(path)
        append = table.snapshots.snapshot(result.snapshot_id)
        (compact_id,) = result.extra_snapshots
        assert append.commit_kind == "APPEND" and table.snapshots.snapshot(compact_id).commit_kind == "COMPACT"
        # the APPEND wrote the batch's new keys at level 0 only: a batch read of it sees the table
        # as the previous COMPACT left it
        appended = table.plan(append.id)
        assert any(f.level == 0 for s in appended.splits for f in s.files), f"batch {i}"
        want[append.id] = before
        want[compact_id] = model.sorted_rows()
    assert len(want) == 6 and want[1] == [] and want[2] != []
    for sid, rows in want.items():
        assert pypaimon_rows(path, sid) == rows, f"snapshot {sid}"
        assert spark_rows(spark, path, sid) == rows, f"snapshot {sid}"
        assert _store_rows(path, sid) == rows, f"snapshot {sid}"

    # a write committed but not compacted yet: the latest snapshot is an APPEND with level-0 files
    table = FileStoreTable.open(path)
    late = {"id": 1000, "dt": "a", "v": 1, "s": "late", "amount": None, "flag": None, "seq": 0}
    w = table.new_write()
    w.write(pa.Table.from_pylist([late], table.schema.arrow_schema()), buckets=0)
    w.commit()
    assert table.latest_snapshot().commit_kind == "APPEND"
    compacted = model.sorted_rows()
    assert pypaimon_rows(path) == compacted
    assert spark_rows(spark, path) == compacted
    assert _store_rows(path) == compacted
