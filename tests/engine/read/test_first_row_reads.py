"""A batch read of a first-row table leaves out level-0 files, as Java Paimon and pypaimon read it:
at the APPEND snapshot of an upsert (before its COMPACT snapshot), by time travel and when the
latest snapshot is an APPEND nothing compacted yet; through the `paimon` Spark source and the store."""

import sys
import uuid

import pyarrow as pa

from dbt_paimon.engine import RunSettings
from dbt_paimon.engine import upsert
from dbt_paimon.store.table import FileStoreTable

from ..helpers import by_key, frame, pypaimon_rows, spark_rows
from ..model import UpsertModel, random_batches

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
                        settings=RunSettings(execution=execution))
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


def _jobs_after_commit(spark, monkeypatch, run):
    """(run()'s result, the Spark jobs started between the upsert's commit and its return, i.e. by
    its post-commit work): those of a job group set at the commit, plus any job started without a
    group (from a thread that does not carry it)."""
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    group = f"post-commit-{uuid.uuid4().hex}"
    ungrouped = set()

    def at_commit(attempt, what):
        if what == "compaction":  # the upsert's own commit marks where its post-commit work starts
            return
        sc._jsc.sc().listenerBus().waitUntilEmpty()
        ungrouped.update(tracker.getJobIdsForGroup(None))
        sc.setJobGroup(group, "the upsert's post-commit work")

    monkeypatch.setattr(sys.modules["dbt_paimon.engine.writes.commit_loop"], "_before_commit", at_commit)
    try:
        result = run()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
        monkeypatch.setattr(sys.modules["dbt_paimon.engine.writes.commit_loop"], "_before_commit", None)
    sc._jsc.sc().listenerBus().waitUntilEmpty()  # the status tracker hears of jobs asynchronously
    return result, len(tracker.getJobIdsForGroup(group)) + len(set(tracker.getJobIdsForGroup(None)) - ungrouped)


def test_driver_local_upsert_compacts_without_a_spark_job(spark, warehouse, monkeypatch):
    """A first-row table compacts after every commit. After a driver-local upsert that compaction
    runs in the driver (threads over buckets): no Spark job starts once the upsert has committed,
    while the Spark job's upsert, measured the same way, compacts on Spark. The COMPACT snapshot
    lands either way, and pypaimon reads the rows the model expects."""
    jobs = {}
    for execution in ("distributed", "local"):
        path = f"{warehouse}/db.db/first_row_{execution}"
        model = UpsertModel(["id"], ["dt"], engine="first-row")
        for i, batch in enumerate(random_batches(seed=33, batches=3, size=25, key_space=40)):
            model.apply(batch)
            def run(b=batch, p=path, e=execution):
                return upsert(frame(spark, b), p, primary_keys="id", partition_keys="dt", options=OPTIONS,
                              settings=RunSettings(execution=e))

            result, jobs[execution, i] = _jobs_after_commit(spark, monkeypatch, run)
            assert result.execution == execution
            (compact_id,) = result.extra_snapshots
            table = FileStoreTable.open(path)
            assert table.snapshots.snapshot(compact_id).commit_kind == "COMPACT"
            assert all(f.level > 0 for s in table.plan().splits for f in s.files)
            assert pypaimon_rows(path) == model.sorted_rows(), f"{execution}, batch {i}"
        assert _store_rows(path) == spark_rows(spark, path) == model.sorted_rows()
    assert all(jobs["distributed", i] >= 1 for i in range(3)), jobs  # the measure sees Spark's compaction
    assert all(jobs["local", i] == 0 for i in range(3)), jobs
