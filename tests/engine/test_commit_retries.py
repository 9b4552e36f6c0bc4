"""A job that loses commit races retries as Paimon's writers do: up to the table's commit.max-retries,
waiting min(commit.min-retry-wait * 2^n, commit.max-retry-wait) plus up to a fifth at random between
attempts; after the last attempt the error names the option to raise, and nothing of the job is left."""

import importlib
import random
import time

import pyarrow
import pytest

from dbt_paimon.engine import RunSettings
from dbt_paimon.engine import upsert
from dbt_paimon.store import CommitConflictError
from dbt_paimon.store.common.options import CoreOptions
from dbt_paimon.store.write.retry import retry_wait_ms
from dbt_paimon.store.table import FileStoreTable

from .helpers import data_files, frame, live_places, spark_rows, sql_tables

ROW = {"id": 0, "dt": "a", "v": 0, "s": "x", "amount": 1, "flag": True, "seq": 0}


def test_the_wait_between_attempts_is_paimons():
    rng = random.Random(1)
    default = CoreOptions({})
    for retry, base in ((1, 20), (2, 40), (5, 320), (10, 10_000), (40, 10_000)):  # 10 ms doubling, 10 s cap
        waits = [retry_wait_ms(default, retry, rng) for _ in range(200)]
        assert base <= min(waits) and max(waits) < base * 1.2
        assert max(waits) - min(waits) > base * 0.1  # jittered: writers that lost together part
    custom = CoreOptions({"commit.min-retry-wait": "5 ms", "commit.max-retry-wait": "30 ms"})
    assert 10 <= retry_wait_ms(custom, 1, rng) < 12 and 30 <= retry_wait_ms(custom, 3, rng) < 36


def _racing(spark, monkeypatch, path, losses: int):
    """Land another writer's commit (a key moved to partition c) between the job and its commit, on each of
    its first `losses` attempts."""
    mod = importlib.import_module("dbt_paimon.engine.writes.commit_loop")
    landed = []

    def racing_writer(attempt, what):
        if what == "compaction":  # the post-commit compaction is not raced
            return
        if attempt <= losses:
            monkeypatch.setattr(mod, "_before_commit", None)  # the racing upsert itself is not raced
            key = 100 + attempt
            upsert(frame(spark, [{**ROW, "id": key, "dt": "c", "v": key}]), path, primary_keys="id",
                   partition_keys="dt")
            landed.append(key)
            monkeypatch.setattr(mod, "_before_commit", racing_writer)

    monkeypatch.setattr(mod, "_before_commit", racing_writer)
    return landed


def test_a_job_that_loses_more_races_than_before_still_commits(spark, warehouse, monkeypatch, execution):
    path = f"{warehouse}/db.db/retries"
    upsert(frame(spark, [{**ROW, "id": i} for i in range(10)]), path, primary_keys="id", partition_keys="dt")
    landed = _racing(spark, monkeypatch, path, losses=5)  # the job used to give up after 3 attempts
    started = time.perf_counter()
    result = upsert(frame(spark, [{**ROW, "id": 3, "dt": "b", "v": 30}, {**ROW, "id": 11, "dt": "b"}]), path,
                    primary_keys="id", partition_keys="dt", settings=RunSettings(execution=execution))
    assert result.attempts == 6 and landed == [101, 102, 103, 104, 105]
    # the racers touched none of the job's keys: its files were committed as they were each time
    assert result.recommits == 5
    # Paimon's waits after attempts 1..5: 20 + 40 + 80 + 160 + 320 ms at least
    assert time.perf_counter() - started >= 0.62
    rows = {r["id"]: r for r in spark_rows(spark, path)}
    assert sorted(rows) == list(range(10)) + [11] + landed
    assert (rows[3]["dt"], rows[3]["v"]) == ("b", 30)
    assert all(n == 1 for n in live_places(path).values())


def test_after_the_last_attempt_the_error_names_the_option_and_nothing_is_left(spark, warehouse, monkeypatch):
    path = f"{warehouse}/db.db/gives_up"
    options = {"commit.max-retries": "2", "commit.min-retry-wait": "1 ms"}
    upsert(frame(spark, [{**ROW, "id": i} for i in range(10)]), path, primary_keys="id", partition_keys="dt",
           options=options)
    landed = _racing(spark, monkeypatch, path, losses=3)
    with pytest.raises(CommitConflictError, match=r"gave up after 3 attempts of the upsert job "
                                                  r"\(commit.max-retries is 2: raise it"):
        upsert(frame(spark, [{**ROW, "id": 3, "dt": "b", "v": 30}]), path, primary_keys="id", partition_keys="dt",
               options=options)
    assert landed == [101, 102, 103]
    rows = {r["id"]: r for r in spark_rows(spark, path)}
    assert sorted(rows) == list(range(10)) + landed and rows[3]["dt"] == "a"
    table = FileStoreTable.open(path)
    live = {f"{s.bucket_path}/{f.file_name}" for s in table.plan().splits for f in s.files}
    assert data_files(path) == live  # every attempt's files were deleted


def _race_statements(spark, monkeypatch, statement: str, losses: int) -> list[int]:
    """Run `statement` (Spark SQL) in the window of each of the engine's first `losses` commit
    attempts (engine/writes/commit_loop.py), as another writer would; the attempts seen, in order."""
    from dbt_paimon.engine.writes import commit_loop

    seen = []

    def racing_writer(attempt, what):
        if what == "compaction":  # the post-commit compaction is not raced
            return
        seen.append(attempt)
        if attempt <= losses:
            monkeypatch.setattr(commit_loop, "_before_commit", None)  # the racing statement is not raced
            spark.sql(statement.format(n=attempt))
            monkeypatch.setattr(commit_loop, "_before_commit", racing_writer)

    monkeypatch.setattr(commit_loop, "_before_commit", racing_writer)
    return seen


def _ever_live(path) -> set[str]:
    """The data files some snapshot of the table holds."""
    table = FileStoreTable.open(path)
    return {f"{s.bucket_path}/{f.file_name}" for sid in range(1, table.latest_snapshot().id + 1)
            for s in table.plan(sid).splits for f in s.files}


def _logs(spark):
    return sorted(tuple(r) for r in spark.sql("SELECT id, dt, v FROM db.logs").collect())


def test_sql_merge_and_delete_on_an_append_table_that_lose_races_run_again(spark, warehouse, monkeypatch):
    """Copy-on-write statements on an append table planned on a snapshot another writer moved past:
    each runs again on the new one (the other writer's rows kept), up to commit.max-retries."""
    base = sql_tables(spark, warehouse)
    seen = _race_statements(spark, monkeypatch, "INSERT INTO db.logs VALUES (1{n}, 'c', 0)", losses=2)
    spark.sql("MERGE INTO db.logs t USING (SELECT 2 AS id, 25 AS v) s ON t.id = s.id "
              "WHEN MATCHED THEN UPDATE SET v = s.v")
    assert seen == [1, 2, 3]
    assert _logs(spark) == [(1, "a", 10), (2, "a", 25), (3, "b", 30), (11, "c", 0), (12, "c", 0)]
    seen.clear()
    spark.sql("DELETE FROM db.logs WHERE id = 3")
    assert seen == [1, 2, 3]
    assert _logs(spark) == [(1, "a", 10), (2, "a", 25), (11, "c", 0), (11, "c", 0), (12, "c", 0), (12, "c", 0)]
    assert data_files(f"{base}/logs") == _ever_live(f"{base}/logs")  # the lost attempts' files deleted


def test_a_statement_that_loses_every_race_names_the_option_and_leaves_nothing(spark, warehouse, monkeypatch):
    base = sql_tables(spark, warehouse)
    spark.sql("ALTER TABLE db.logs SET TBLPROPERTIES ('commit.max-retries' = '1', 'commit.min-retry-wait' = '1 ms')")
    seen = _race_statements(spark, monkeypatch, "INSERT INTO db.logs VALUES (1{n}, 'c', 0)", losses=5)
    with pytest.raises(CommitConflictError, match=r"gave up after 2 attempts of the MERGE INTO db.logs "
                                                  r"\(commit.max-retries is 1: raise it"):
        spark.sql("MERGE INTO db.logs t USING (SELECT 2 AS id, 25 AS v) s ON t.id = s.id "
                  "WHEN MATCHED THEN UPDATE SET v = s.v")
    assert seen == [1, 2]
    assert _logs(spark) == [(1, "a", 10), (2, "a", 20), (3, "b", 30), (11, "c", 0), (12, "c", 0)]
    assert data_files(f"{base}/logs") == _ever_live(f"{base}/logs")


def test_a_commit_that_spent_its_retries_racing_for_the_snapshot_is_not_run_again(spark, warehouse, monkeypatch):
    """One commit.max-retries for both kinds of lost race: a compaction whose commit lost the race for
    the next snapshot id on every one of the store's attempts (another writer's commit landed first
    each time) gives up with them, rather than planning and rewriting again for another round of
    them (engine/writes/commit_loop.py)."""
    from dbt_paimon.engine import compact
    from dbt_paimon.store.write.commit import FileStoreCommit
    from dbt_paimon.store.common.errors import CommitRetriesExhaustedError

    path = f"{warehouse}/db.db/spent"
    options = {"commit.max-retries": "2", "commit.min-retry-wait": "1 ms", "commit.max-retry-wait": "2 ms",
               "bucket": "1", "write-only": "true"}
    for v in (1, 2):  # two level-0 files in bucket 0 of partition a: something to compact
        upsert(frame(spark, [{**ROW, "id": i, "v": v} for i in range(5)]), path, primary_keys="id",
               partition_keys="dt", options=options)
    table = FileStoreTable.open(path)
    arrow = table.schema.arrow_schema()
    real, racing = FileStoreCommit._publish, []

    def publish(self, latest, snapshot):
        if snapshot.commit_kind == "COMPACT":  # another writer's append takes snapshot-N first
            write = FileStoreTable.open(path).new_write()
            write.write(pyarrow.Table.from_pylist([{**ROW, "id": 100 + len(racing), "dt": "z"}]).cast(arrow))
            write.commit()
            racing.append(snapshot.id)
        return real(self, latest, snapshot)

    monkeypatch.setattr(FileStoreCommit, "_publish", publish)
    with pytest.raises(CommitRetriesExhaustedError, match="gave up committing"):
        compact(spark, path, settings=RunSettings(execution="local"))
    assert len(racing) == 3  # the store's three attempts (1 + commit.max-retries), and no more
    assert data_files(path) == {f"{s.bucket_path}/{f.file_name}" for s in FileStoreTable.open(path).plan().splits
                                for f in s.files}  # the compaction's files deleted


def test_a_delete_takes_commit_max_retries_from_its_run_settings(spark, warehouse, monkeypatch):
    """The run's commit.max-retries (RunSettings) rules over the table's, for a delete as for an upsert."""
    from dbt_paimon.engine import delete
    base = sql_tables(spark, warehouse)
    seen = _race_statements(spark, monkeypatch, "INSERT INTO db.logs VALUES (1{n}, 'c', 0)", losses=5)
    with pytest.raises(CommitConflictError, match=r"gave up after 2 attempts of the delete job "
                                                  r"\(commit.max-retries is 1: raise it"):
        delete(spark, f"{base}/logs", "id = 3", settings=RunSettings(commit_max_retries=1))
    assert seen == [1, 2]
    assert _logs(spark) == [(1, "a", 10), (2, "a", 20), (3, "b", 30), (11, "c", 0), (12, "c", 0)]
    assert data_files(f"{base}/logs") == _ever_live(f"{base}/logs")


def test_work_that_fails_after_the_commit_never_deletes_what_the_commit_holds(spark, warehouse, monkeypatch):
    """Once a snapshot is created its files are the table's: an upsert whose post-commit work fails
    (a compaction job lost, an interrupt), or a compaction whose LATEST hint cannot be written after
    its snapshot was, raises, and the table still reads every row of the committed snapshot."""
    upsert_module = importlib.import_module("dbt_paimon.engine.writes.upsert")
    from dbt_paimon.engine import compact
    from dbt_paimon.store.snapshot.snapshot import SnapshotManager

    path = f"{warehouse}/db.db/after_commit"
    upsert(frame(spark, [{**ROW, "id": i} for i in range(5)]), path, primary_keys="id", partition_keys="dt",
           options={"bucket": "1"})

    def lost(*args, **kwargs):
        raise RuntimeError("the post-commit compaction's job was lost")
    monkeypatch.setattr(upsert_module, "after_commit", lost)
    with pytest.raises(RuntimeError, match="job was lost"):
        upsert(frame(spark, [{**ROW, "id": i, "v": 7} for i in range(3, 8)]), path, primary_keys="id",
               partition_keys="dt", options={"bucket": "1"})
    monkeypatch.undo()
    table = FileStoreTable.open(path)
    assert table.latest_snapshot().id == 2
    rows = {r["id"]: r["v"] for r in table.to_arrow().to_pylist()}
    assert rows == {0: 0, 1: 0, 2: 0, 3: 7, 4: 7, 5: 7, 6: 7, 7: 7}

    real = SnapshotManager.commit_latest_hint

    def hint_fails(self, snapshot_id):
        monkeypatch.setattr(SnapshotManager, "commit_latest_hint", real)
        raise OSError("the LATEST hint could not be written")
    monkeypatch.setattr(SnapshotManager, "commit_latest_hint", hint_fails)
    with pytest.raises(OSError, match="LATEST hint"):
        compact(spark, path, settings=RunSettings(execution="local"))
    table = FileStoreTable.open(path)
    assert table.latest_snapshot().commit_kind == "COMPACT"
    assert {r["id"]: r["v"] for r in table.to_arrow().to_pylist()} == rows
    assert data_files(path) >= {f"{s.bucket_path}/{f.file_name}" for s in table.plan().splits for f in s.files}
