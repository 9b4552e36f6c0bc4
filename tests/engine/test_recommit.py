"""A conflict costs what it invalidates (issue 41): when the commits that beat a job changed none of
its batch's keys, its files are committed on the new snapshot without running it again; when they
changed one (written, skipped or moved), or rewrote a HASH index file the job rewrites too, the
job runs again. Either way the table is what the serial order of the commits gives."""

import importlib

import pytest

from dbt_paimon.engine import RunSettings, compact
from dbt_paimon.engine import delete, upsert
from dbt_paimon.engine.runtime.distributed import DistributedExecutor
from dbt_paimon.engine.runtime.local import LocalExecutor
from dbt_paimon.store.table import FileStoreTable

from .helpers import data_files, frame, live_places, spark_rows

ROW = {"id": 0, "dt": "a", "v": 0, "s": "x", "amount": 1, "flag": True, "seq": 10}
# (primary key, partition keys, options) of each bucket mode
LAYOUTS = {
    "cross-partition": ("id", "dt", {}),
    "fixed": ("id", (), {"bucket": "2"}),
    "dynamic": ("id", (), {}),
}


@pytest.fixture
def runs(monkeypatch):
    """How many times an upsert job ran (either executor)."""
    count = []
    for cls in (LocalExecutor, DistributedExecutor):
        original = cls.run_job

        def counted(self, *args, _original=original, **kwargs):
            count.append(1)
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(cls, "run_job", counted)
    return count


def _race(monkeypatch, action):
    """Run `action` (another writer's commit) between the first attempt's job and its commit."""
    mod = importlib.import_module("dbt_paimon.engine.writes.commit_loop")

    def racing_writer(attempt, what):
        if what == "compaction":  # the post-commit compaction is not raced
            return
        if attempt == 1:
            monkeypatch.setattr(mod, "_before_commit", None)  # the racing writer itself is not raced
            action()

    monkeypatch.setattr(mod, "_before_commit", racing_writer)


def _table(spark, path, layout, rows, **kwargs):
    pk, parts, options = LAYOUTS[layout]
    return upsert(frame(spark, rows), path, primary_keys=pk, partition_keys=parts, options=options, **kwargs)


def _check_files(path):
    assert all(n == 1 for n in live_places(path).values())
    table = FileStoreTable.open(path)
    assert data_files(path) == {f"{s.bucket_path}/{f.file_name}" for s in table.plan().splits for f in s.files}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_race_on_other_keys_commits_the_jobs_files_as_they_are(spark, warehouse, monkeypatch, execution, layout,
                                                                 runs):
    path = f"{warehouse}/db.db/other_keys_{layout}"
    _table(spark, path, layout, [{**ROW, "id": i} for i in range(10)])
    # another writer updates key 5 (and, where no HASH index file is shared, adds key 50)
    theirs = [{**ROW, "id": 5, "v": 55}] + ([] if layout == "dynamic" else [{**ROW, "id": 50, "v": 50}])
    _race(monkeypatch, lambda: _table(spark, path, layout, theirs))
    runs.clear()
    ours = [{**ROW, "id": 3, "v": 30}, {**ROW, "id": 11, "v": 11}]
    result = _table(spark, path, layout, ours, settings=RunSettings(execution=execution))
    assert (result.attempts, result.recommits, len(runs)) == (2, 1, 2)  # the racer's run, ours once
    assert (result.inserted, result.updated) == (1, 1) and result.snapshot_id == 3
    rows = {r["id"]: r["v"] for r in spark_rows(spark, path)}
    assert rows == {**{i: 0 for i in range(10)}, 3: 30, 5: 55, 11: 11, **({} if layout == "dynamic" else {50: 50})}
    _check_files(path)


def test_a_race_on_a_key_the_job_skipped_runs_it_again(spark, warehouse, monkeypatch, execution, runs):
    """Key 3's stored row is newer (sequence_by) than the batch's, so the job skips it; the racing
    writer deletes key 3, after which the batch's row is the only one: the job must run again."""
    path = f"{warehouse}/db.db/skipped"
    _table(spark, path, "cross-partition", [{**ROW, "id": i} for i in range(10)], sequence_by="seq")
    _race(monkeypatch, lambda: delete(spark, path, "id = 3"))
    runs.clear()
    result = _table(spark, path, "cross-partition", [{**ROW, "id": 3, "v": 30, "seq": 5}, {**ROW, "id": 11}],
                    sequence_by="seq", settings=RunSettings(execution=execution))
    assert (result.attempts, result.recommits, len(runs)) == (2, 0, 2)
    assert (result.inserted, result.skipped) == (2, 0)
    rows = {r["id"]: r["v"] for r in spark_rows(spark, path)}
    assert rows[3] == 30 and 11 in rows
    _check_files(path)


def test_new_keys_in_the_same_dynamic_bucket_run_the_job_again(spark, warehouse, monkeypatch, execution, runs):
    """Both writers add keys to the one open bucket of a dynamic-bucket table: each rewrote that
    bucket's HASH index file, so the job runs again and the index holds both writers' keys."""
    path = f"{warehouse}/db.db/same_bucket"
    _table(spark, path, "dynamic", [{**ROW, "id": i} for i in range(10)])
    # one assigner each: a new key goes to the first bucket with room (with more, to its assigner's)
    one = RunSettings(assigner_parallelism=1)
    _race(monkeypatch, lambda: _table(spark, path, "dynamic", [{**ROW, "id": 50, "v": 50}], settings=one))
    runs.clear()
    result = _table(spark, path, "dynamic", [{**ROW, "id": 11, "v": 11}],
                    settings=RunSettings(execution=execution, assigner_parallelism=1))
    assert (result.attempts, result.recommits, len(runs)) == (2, 0, 3)
    again = _table(spark, path, "dynamic", [{**ROW, "id": 50, "v": 51}, {**ROW, "id": 11, "v": 12}])
    assert (again.inserted, again.updated) == (0, 2)  # the index knows both writers' keys
    _check_files(path)


def test_a_compaction_racing_the_job_changes_no_key(spark, warehouse, monkeypatch, execution, runs):
    path = f"{warehouse}/db.db/compacted"
    _table(spark, path, "cross-partition", [{**ROW, "id": i, "dt": "ab"[i % 2]} for i in range(10)])
    _race(monkeypatch, lambda: compact(spark, path))
    runs.clear()
    result = _table(spark, path, "cross-partition", [{**ROW, "id": 3, "dt": "b", "v": 30}, {**ROW, "id": 4, "dt": "b"}],
                    settings=RunSettings(execution=execution))
    assert (result.attempts, result.recommits, len(runs)) == (2, 1, 1)
    assert (result.updated, result.moved) == (1, 1)
    rows = {r["id"]: (r["dt"], r["v"]) for r in spark_rows(spark, path)}
    assert rows[3] == ("b", 30) and rows[4] == ("b", 0) and len(rows) == 10
    _check_files(path)


def test_a_batch_digest_holds_every_key_of_its_batch_and_few_others():
    """The digest a distributed job checks the commits between with (recommit.py): never a false
    'not held' (that would commit a stale job), seldom a false 'held' (that costs a pass)."""
    import numpy as np
    import pyarrow as pa

    from dbt_paimon.engine.runtime import recommit
    from dbt_paimon.store.schema.schema import build_schema

    ours = pa.table({"id": pa.array(range(0, 50_000), pa.int64()), "v": pa.array([0] * 50_000, pa.int64())})
    schema = build_schema(ours.schema, primary_keys=["id"])
    others = pa.table({"id": pa.array(range(10**9, 10**9 + 10_000), pa.int64())})
    bits = recommit.digest_bits(ours.num_rows)
    assert bits == 1 << 22 and recommit.digest_bits(1) == recommit.DIGEST_MIN_BITS
    assert recommit.digest_bits(10**9) == recommit.DIGEST_MAX_BITS
    digest = recommit.key_digest(ours, schema, bits)
    own = recommit.key_hash_of(ours, schema)
    assert all(recommit.digest_may_hold(digest, own[i:i + 1]) for i in range(0, ours.num_rows, 97))
    assert recommit.digest_may_hold(digest, own)
    theirs = recommit.key_hash_of(others, schema)
    false_held = sum(recommit.digest_may_hold(digest, theirs[i:i + 1]) for i in range(theirs.size))
    assert false_held / theirs.size < 0.03
    assert not recommit.digest_may_hold(digest, np.array([], dtype=np.int32))


def test_a_rollback_and_a_commit_that_reuse_the_jobs_snapshot_id_run_it_again(spark, warehouse, monkeypatch,
                                                                               execution, runs):
    """The job read snapshot 2; meanwhile the table is rolled back to 1 (key 3's update gone) and another
    writer commits a new snapshot 2. Same id, other rows: the job's files are not committed on it, the job
    runs again and finds key 3 as the new snapshot holds it."""
    path = f"{warehouse}/db.db/rolled_back"
    _table(spark, path, "cross-partition", [{**ROW, "id": i} for i in range(10)])
    _table(spark, path, "cross-partition", [{**ROW, "id": 3, "dt": "b", "v": 33}])

    def rollback_and_commit():
        FileStoreTable.open(path).rollback_to(1)
        _table(spark, path, "cross-partition", [{**ROW, "id": 50, "v": 50}])
    _race(monkeypatch, rollback_and_commit)
    runs.clear()
    result = _table(spark, path, "cross-partition", [{**ROW, "id": 3, "dt": "a", "v": 30}],
                    settings=RunSettings(execution=execution))
    assert (result.attempts, result.recommits, len(runs)) == (2, 0, 3)  # the racer's run, ours twice
    assert (result.updated, result.moved) == (1, 0)  # key 3 lives in dt=a again after the rollback
    rows = {r["id"]: (r["dt"], r["v"]) for r in spark_rows(spark, path)}
    assert rows[3] == ("a", 30) and rows[50] == ("a", 50) and len(rows) == 11
    _check_files(path)
