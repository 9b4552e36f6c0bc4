"""Every way the product reads a Paimon table gives the table's rows, however a read is reused.

The ways: `read()` (read/native.py: Spark's Parquet reader for files that need no merge, the `paimon`
source for the rest), `spark.read.format("paimon")`, `spark.table()` and `spark.sql()` on the
catalog entry (queries rewritten to the native plan, read/query.py), and a temporary view over a
loaded DataFrame. A DataFrame loaded once answers each later query (filters on the key, the
partition and values, counts, aggregates, a join with itself) as a fresh load would: Spark 4.1-4.3
keep what a Python source planned for one query's filters for the next query on the DataFrame."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from dbt_paimon.engine import RunSettings, changes, compact, delete, read, upsert, write
from dbt_paimon.sql import register
from dbt_paimon.store import FileStoreTable, PaimonError

SCHEMA = "id bigint, dt string, v string, n int"
LOCAL = RunSettings(execution="local")
KINDS = ("level-0", "compacted", "deletion-vectors", "append")


def _rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def _build(spark, warehouse: str, kind: str) -> tuple[str, dict]:
    """A table of the kind and its model {id: (id, dt, v, n)}; two snapshots at least."""
    name = "reads_" + kind.replace("-", "_")
    path = f"{warehouse}/db.db/{name}"
    first = [(k, "a" if k % 2 else "b", f"v{k}", k % 7) for k in range(40)]
    second = [(k, "a" if k % 3 else "c", f"w{k}", k) for k in range(30, 50)]  # keys 30-39 move partition
    if kind == "append":
        for batch in (first, second):
            write(spark.createDataFrame(batch, SCHEMA), path, partition_keys=["dt"], settings=LOCAL)
        rows = first + second
        return path, {i: r for i, r in enumerate(sorted(rows))}
    options = {"bucket": "-1"} if kind != "deletion-vectors" else {"bucket": "-1", "deletion-vectors.enabled": "true"}
    for batch in (first, second):
        upsert(spark.createDataFrame(batch, SCHEMA), path, primary_keys=["id"], partition_keys=["dt"],
               options=options, settings=LOCAL)
    delete(spark, path, "id IN (3, 44)")
    model = {r[0]: r for r in first}
    model.update({r[0]: r for r in second})
    for k in (3, 44):
        model.pop(k)
    if kind != "level-0":
        compact(spark, path)
    return path, model


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    import os
    warehouse = str(tmp_path_factory.mktemp("reads"))
    os.makedirs(f"{warehouse}/db.db")
    built = {kind: _build(spark, warehouse, kind) for kind in KINDS}
    register(spark, warehouse=warehouse)
    return built


def _ways(spark, path: str) -> dict:
    name = "db." + path.rsplit("/", 1)[1]

    def view():
        spark.read.format("paimon").load(path).createOrReplaceTempView("reads_loaded")
        return spark.table("reads_loaded")
    return {"read()": lambda: read(spark, path), "format(paimon)": lambda: spark.read.format("paimon").load(path),
            "spark.table": lambda: spark.table(name), "spark.sql": lambda: spark.sql(f"select * from {name}"),
            "temp view": view}


@pytest.mark.parametrize("kind", KINDS)
def test_a_dataframe_answers_every_later_query_as_a_fresh_read(spark, tables, kind):
    path, model = tables[kind]
    rows = sorted(model.values())
    some = sorted(model)[:2] if kind != "append" else [rows[0][0], rows[1][0]]
    for way, load in _ways(spark, path).items():
        df = load()
        assert df.where(f"id IN ({some[0]}, {some[1]})").count() == sum(r[0] in some for r in rows), way
        assert df.count() == len(rows), way  # before the fix: 2
        assert df.where("dt = 'a'").count() == sum(r[1] == "a" for r in rows), way
        assert _rows(df) == rows, way
        assert df.where("v LIKE 'w%' AND n > 35").count() == sum(r[2][0] == "w" and r[3] > 35 for r in rows), way
        [total] = df.groupBy().sum("n").collect()
        assert total[0] == sum(r[3] for r in rows), way
        joined = df.where("dt = 'c'").join(df, ["id"]).count() if kind != "append" else None
        if joined is not None:
            assert joined == sum(r[1] == "c" for r in rows), way
        assert df.count() == len(rows), way


def test_a_time_travelled_dataframe_keeps_its_snapshot_however_reused(spark, tables):
    path, _ = tables["level-0"]
    table = FileStoreTable.open(path)
    table.create_tag("reads_first", 1)
    want = sorted((k, "a" if k % 2 else "b", f"v{k}", k % 7) for k in range(40))
    for df in (read(spark, path, snapshot_id=1), read(spark, path, tag="reads_first"),
               spark.read.format("paimon").option("snapshot-id", 1).load(path),
               spark.read.format("paimon").option("tag", "reads_first").load(path)):
        assert df.where("id = 31").count() == 1
        assert df.count() == 40
        assert _rows(df) == want


@pytest.mark.parametrize("options, words", [
    ({"snapshot_id": "1"}, r"unknown read option 'snapshot_id' \(did you mean 'snapshot-id'\?\)"),
    ({"incremental_between": "1,2"}, r"did you mean 'incremental-between'\?"),
    ({"incremental-betwen": "1,2"}, r"did you mean 'incremental-between'\?"),
    ({"snapshot-id": "abc"}, r"snapshot-id 'abc' is not a snapshot id"),
    ({"snapshot-id": "99"}, r"snapshot 99 does not exist: the table has snapshots 1\.\.\d+"),
    # Paimon's scan options a read cannot follow: refused, not the latest rows instead
    ({"scan.timestamp-millis": "1"}, r"no snapshot was committed at or before 1 \(epoch milliseconds"),
    ({"scan.timestamp": "2024-01-01 00:00:00"}, r"no snapshot was committed at or before \d+ \(epoch milliseconds, "
                                                r"scan.timestamp '2024-01-01 00:00:00'\)"),
    ({"scan.timestamp": "yesterday"}, r"scan.timestamp takes 'yyyy-MM-dd HH:mm:ss', got 'yesterday'"),
    ({"scan.mode": "from-timestamp"}, r"scan.mode 'from-timestamp' needs one of 'scan.timestamp-millis'"),
    ({"scan.mode": "compacted-full"}, r"scan.mode 'compacted-full' is not supported"),
    ({"scan.watermark": "5"}, r"read option 'scan.watermark' is not supported"),
    ({"scan.version": "nope"}, r"version 'nope' is neither a tag of the table nor a snapshot id"),
])
def test_a_read_option_the_source_cannot_honour_is_refused_as_written(spark, tables, options, words):
    """A misspelt option would otherwise be ignored and the read give the latest snapshot; a snapshot
    id that is no number or no snapshot is the reader's mistake, not a corrupt table."""
    path, _ = tables["level-0"]
    with pytest.raises(Exception, match=words) as raised:
        spark.read.format("paimon").options(**options).load(path).count()
    assert "Corrupt" not in str(raised.value)
    if options.get("snapshot-id") == "99":
        with pytest.raises(PaimonError, match=words):
            read(spark, path, snapshot_id=99)
    with pytest.raises(Exception, match=words):
        with_options = ", ".join(f"'{k}' = '{v}'" for k, v in options.items())
        spark.sql(f"select count(*) from db.{path.rsplit('/', 1)[1]} WITH ({with_options})").collect()


def test_a_query_reads_through_sparks_parquet_reader(spark, tables):
    """Every kind here is read by Spark alone: the level-0 table's buckets less the versions their
    merge drops (deletions.py), the others whole (the deletion-vector table is compacted). (The answers
    are the tests above: here, which reader ran.)"""
    for kind in KINDS:
        path, _ = tables[kind]
        plan = spark.sql(f"select count(*) from db.{path.rsplit('/', 1)[1]}")._jdf.queryExecution().executedPlan()
        text = plan.toString()
        assert "FileScan parquet" in text and "(Python)" not in text, (kind, text)
        # the level-0 table's rows tested against the bitmap of the rows its merge drops (lost_rows.py)
        assert ("LocalTableScan [bits" in text) == (kind == "level-0"), (kind, text)


def _native(df) -> bool:
    """Whether the DataFrame's plan reads the files as Spark's Parquet relation, not through the
    `paimon` Python source (a RelationV2, or a `(Python)` scan once planned)."""
    text = df._jdf.queryExecution().executedPlan().toString()
    return "parquet" in text.lower() and "RelationV2" not in text and "(Python)" not in text


def test_statements_that_write_a_query_read_it_natively(spark, tables):
    """dbt-spark's `table` model (CREATE TABLE ... AS SELECT) and an INSERT ... SELECT into a table of
    Spark's own read the Paimon table as a query does (Spark's Parquet reader, the merge's lost rows
    left out). (REPLACE TABLE ... AS SELECT takes the same path; Spark's own catalog refuses it for
    Parquet tables, so it is not run here.)"""
    path, model = tables["level-0"]
    name = "db." + path.rsplit("/", 1)[1]
    want = sorted((dt, sum(1 for r in model.values() if r[1] == dt)) for dt in {r[1] for r in model.values()})
    spark.sql("DROP TABLE IF EXISTS db.reads_copied")
    try:
        made = spark.sql(f"CREATE TABLE db.reads_copied USING parquet AS "
                         f"SELECT dt, count(*) AS n FROM {name} GROUP BY dt")
        assert _native(made), made._jdf.queryExecution().executedPlan().toString()  # the command as it ran
        assert _rows(spark.table("db.reads_copied")) == want
        spark.sql(f"INSERT INTO db.reads_copied SELECT dt, count(*) FROM {name} GROUP BY dt")
        assert _rows(spark.table("db.reads_copied")) == sorted(want + want)
    finally:
        spark.sql("DROP TABLE IF EXISTS db.reads_copied")
    assert not [r for r in spark.sql("SHOW VIEWS").collect() if r.viewName.startswith("__paimon_read_")]


def test_a_view_over_a_paimon_table_reads_it_natively_under_the_views_names(spark, tables):
    """dbt's `view` models: a query naming a permanent view whose text reads a Paimon table reads the
    text natively (views over such views too), with the view's column names and types; a view over
    Spark's own tables is Spark's."""
    path, model = tables["level-0"]
    name = "db." + path.rsplit("/", 1)[1]
    views = ["db.reads_nested", "db.reads_renamed", "db.reads_viewed", "db.reads_plain"]
    try:
        spark.sql(f"CREATE OR REPLACE VIEW db.reads_viewed AS SELECT id, dt FROM {name}")
        spark.sql(f"CREATE OR REPLACE VIEW db.reads_renamed (k, part) AS SELECT id, dt FROM {name} WHERE n > 3")
        spark.sql("CREATE OR REPLACE VIEW db.reads_nested AS SELECT part, count(*) AS c FROM db.reads_renamed "
                  "GROUP BY part")
        spark.sql("CREATE OR REPLACE VIEW db.reads_plain AS SELECT 1 AS one")
        viewed = spark.sql("SELECT * FROM db.reads_viewed")
        assert _native(viewed) and _rows(viewed) == sorted((r[0], r[1]) for r in model.values())
        renamed = spark.sql("SELECT r.k, part FROM db.reads_renamed r")
        assert renamed.columns == ["k", "part"] and _native(renamed)
        assert _rows(renamed) == sorted((r[0], r[1]) for r in model.values() if r[3] > 3)
        nested = spark.sql("SELECT * FROM db.reads_nested")
        counts: dict = {}
        for r in model.values():
            if r[3] > 3:
                counts[r[1]] = counts.get(r[1], 0) + 1
        assert _native(nested) and _rows(nested) == sorted(counts.items())
        assert spark.sql("SELECT * FROM db.reads_plain").collect() == [(1,)]
    finally:
        for view in views:
            spark.sql(f"DROP VIEW IF EXISTS {view}")
    assert not [r for r in spark.sql("SHOW VIEWS").collect() if r.viewName.startswith("__paimon_read_")]


def test_a_query_keeps_its_own_names_qualifiers_ctes_and_subqueries(spark, tables):
    path, model = tables["compacted"]
    name = "db." + path.rsplit("/", 1)[1]
    rows = sorted(model.values())
    short = name.split(".")[1]
    assert spark.sql(f"select {short}.id from {name} where {short}.dt = 'c' order by 1").collect() == \
        [(r[0],) for r in rows if r[1] == "c"]
    assert spark.sql(f"select x.id from {name} x join {name} y on x.id = y.id where y.n = 31").collect() == [(31,)]
    assert spark.sql(f"with {short} as (select 1 as id) select * from {short}").collect() == [(1,)]
    assert spark.sql(f"select count(*) from {name} where id in (select id from {name} where dt = 'b')"
                     ).collect() == [(sum(r[1] == "b" for r in rows),)]
    assert spark.sql(f"table {name}").count() == len(rows)
    assert not [r for r in spark.sql("SHOW VIEWS").collect() if r.viewName.startswith("__paimon_read_")]


@pytest.mark.parametrize("options", [
    {"bucket": "2", "write-only": "true"},
    {"bucket": "2", "write-only": "true", "sequence.field": "n"},
    {"bucket": "2", "write-only": "true", "merge-engine": "first-row"},
    {"bucket": "2", "write-only": "true", "merge-engine": "partial-update",
     "partial-update.remove-record-on-delete": "true"},
    {"bucket": "-1", "deletion-vectors.enabled": "true"},
    {"bucket": "2", "write-only": "true", "ignore-delete": "true"},
], ids=["deduplicate", "sequence-field", "first-row", "partial-update", "deletion-vectors", "ignore-delete"])
def test_buckets_merged_by_position_read_as_the_merge_reads_them(spark, tmp_path, options):
    """Random histories of upserts and deletes, no compaction between (level-0 files pile up): Spark's
    reader, leaving out the versions a merge drops (read/deletions.py), gives the store's merge."""
    import random

    from dbt_paimon.store.read.read import TableRead
    rng = random.Random(58)
    path = str(tmp_path / "db.db" / "history")
    keys = ["dt", "id"] if options["bucket"] != "-1" else ["id"]
    for step in range(3):
        batch = [(k, rng.choice("ab") if keys == ["id"] else "ab"[k % 2], f"s{step}k{k}", rng.randrange(100))
                 for k in rng.sample(range(60), 25)]
        upsert(spark.createDataFrame(batch, SCHEMA), path, primary_keys=keys, partition_keys=["dt"],
               options=options, settings=LOCAL)
        if step % 2 and "first-row" not in options.values():
            gone = rng.sample(range(60), 5)
            if options["bucket"] == "-1":
                delete(spark, path, f"id IN ({', '.join(map(str, gone))})")
            else:  # -D records as a writer streams them (ignore-delete: dropped by the merge)
                table = FileStoreTable.open(path)
                rows = [{"id": k, "dt": "ab"[k % 2], "v": None, "n": 1000} for k in gone]
                writer = table.new_write()
                writer.write(pa.Table.from_pylist(rows, table.schema.arrow_schema()), row_kinds=[3] * len(rows))
                writer.commit()
    table = FileStoreTable.open(path)
    plan = table.plan(batch_read=True)
    if options.get("write-only"):  # buckets to merge (a first-row batch read skips level 0: none)
        assert any(len(s.files) > 1 for s in plan.splits) or "first-row" in options.values()
    want = sorted(tuple(r.values()) for r in TableRead(table.io, path, table.schema).read(plan.splits).to_pylist())
    assert _rows(read(spark, path)) == want
    assert _rows(spark.read.format("paimon").load(path)) == want


def test_a_table_made_anew_at_the_same_path_is_read_anew(spark, tmp_path):
    """Snapshot 1 of a table made again where one was (a full refresh, a dropped and re-created table)
    is another snapshot: nothing planned for the first is read for the second."""
    import shutil
    path = str(tmp_path / "db.db" / "anew")
    for rows in ([(1, "a", "x", 1), (2, "b", "y", 2)], [(7, "c", "z", 3)]):
        shutil.rmtree(path, ignore_errors=True)
        upsert(spark.createDataFrame(rows, SCHEMA), path, primary_keys=["id"], partition_keys=["dt"], settings=LOCAL)
        assert FileStoreTable.open(path).snapshots.latest_id() == 1
        assert _rows(read(spark, path)) == sorted(rows)


def _waiting_in_frame(thread) -> bool:
    """Whether `thread` waits right inside read/native.py's frame() (for another thread's plan): its
    innermost calls are waits (Event.wait, Condition.wait), called by frame() itself."""
    import os
    import sys
    f = sys._current_frames().get(thread.ident)
    if f is None or f.f_code.co_name != "wait":
        return False
    while f is not None and f.f_code.co_name == "wait":
        f = f.f_back
    return (f is not None and f.f_code.co_name == "frame"
            and f.f_code.co_filename.endswith(os.path.join("read", "native.py")))


@pytest.mark.parametrize("first_plan", ["made", "failed"])
def test_readers_of_a_snapshot_being_planned_wait_for_that_plan(spark, tmp_path, monkeypatch, first_plan):
    """Two threads read a snapshot no DataFrame was made for yet (dbt's threads starting a model's
    tests together): the second waits for the first's plan and gets its DataFrame, one plan in all.
    If the first plan fails, the waiting reader plans the snapshot itself and gets its rows."""
    import threading
    import time as clock

    from dbt_paimon.engine.read import native

    path = str(tmp_path / "db.db" / "planned_once")
    rows = [(1, "a", "x", 1), (2, "b", "y", 2)]
    upsert(spark.createDataFrame(rows, SCHEMA), path, primary_keys=["id"], partition_keys=["dt"], settings=LOCAL)
    plans, entered, release = [], threading.Event(), threading.Event()
    real_plan = native._plan

    def plan(*args):
        plans.append(threading.current_thread().name)
        if len(plans) == 1:
            entered.set()
            assert release.wait(60)
            if first_plan == "failed":
                raise RuntimeError("the first plan failed")
        return real_plan(*args)
    monkeypatch.setattr(native, "_plan", plan)
    got = {}

    def reader(name):
        try:
            got[name] = read(spark, path)
        except RuntimeError as e:
            got[name] = e
    first = threading.Thread(target=reader, args=("first",), name="first")
    second = threading.Thread(target=reader, args=("second",), name="second")
    first.start()
    assert entered.wait(60)
    second.start()
    deadline = clock.monotonic() + 60
    while not _waiting_in_frame(second):  # the second reader found the plan under way
        assert second.is_alive() and clock.monotonic() < deadline
        clock.sleep(0.01)
    release.set()
    first.join(60)
    second.join(60)
    if first_plan == "made":
        assert plans == ["first"] and got["first"] is got["second"]
    else:
        assert plans == ["first", "second"] and isinstance(got["first"], RuntimeError)
    assert _rows(got["second"]) == sorted(rows)
    assert read(spark, path) is got["second"] and len(plans) == (1 if first_plan == "made" else 2)


def _scan_text(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


@pytest.mark.parametrize("case", ["strings", "ints", "legacy-date", "null-partition"])
def test_a_partition_filter_leaves_out_whole_directories_where_spark_reads_them(spark, tmp_path, case):
    """Where each partition directory's name reads in Spark as the value Paimon holds, Spark takes the
    partition fields from the directories and prunes them when it plans a query (PartitionFilters);
    a legacy DATE (days since epoch) or a null (the default partition's name) would read otherwise,
    so those tables read the values the files hold. The answers are the same either way."""
    import datetime as dt
    path = str(tmp_path / "db.db" / "parts")
    values = {"strings": ["a/b", "x=y", "50%", "%41", "sp ace", "ü#{}"], "ints": [-3, 0, 7, 12],
              "legacy-date": [dt.date(2024, 1, d) for d in (1, 2, 3)], "null-partition": ["a", None, "b"]}[case]
    kind = {"strings": "string", "ints": "int", "legacy-date": "date", "null-partition": "string"}[case]
    schema = f"id bigint, p {kind}, v string"
    rows = [(k, values[k % len(values)], f"v{k}") for k in range(30)]
    upsert(spark.createDataFrame(rows[:20], schema), path, primary_keys=["id"], partition_keys=["p"],
           options={"bucket": "2", "write-only": "true"}, settings=LOCAL)
    upsert(spark.createDataFrame(rows[10:], schema).withColumn("v", F.lit("w")), path,
           primary_keys=["id"], partition_keys=["p"], options={"bucket": "2", "write-only": "true"}, settings=LOCAL)
    model = {r[0]: r for r in rows[:10]}
    model.update({r[0]: (r[0], r[1], "w") for r in rows[10:]})
    df = read(spark, path)
    assert _rows(df) == sorted(model.values())
    for value in values:
        chosen = df.where(df.p.isNull()) if value is None else df.where(df.p == value)
        assert _rows(chosen) == sorted(r for r in model.values() if r[1] == value), value
        text = _scan_text(chosen)
        assert "FileScan parquet" in text and "(Python)" not in text, text
        pruned = "PartitionFilters: [isnotnull(p" in text or "PartitionFilters: [isnull(p" in text
        assert pruned == (case in ("strings", "ints")), text


def test_a_read_and_the_source_take_the_object_stores_settings_from_run_settings(spark, s3_server):
    """No store settings configured in the process: those a read, a read of changes and `register` are
    given reach the table's files, the planning in the driver and the `paimon` source's Python workers
    alike."""
    import uuid

    from tests.s3 import BUCKET

    settings = RunSettings(storage_options=s3_server.options)
    path = f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}/wh/db.db/t"
    rows = spark.createDataFrame([(1, "a", 10), (2, "b", 20)], "id BIGINT, dt STRING, v BIGINT")
    upsert(rows, path, primary_keys="id", partition_keys="dt", settings=settings)
    # key 2 moves to partition c: its change is read from two files (gone from b, in c), folded
    upsert(rows.where("id = 2").withColumn("v", F.lit(21)).withColumn("dt", F.lit("c")), path, primary_keys="id",
           partition_keys="dt", settings=settings)
    assert _rows(read(spark, path, settings=settings)) == [(1, "a", 10), (2, "c", 21)]
    assert [tuple(r)[1:] for r in changes(spark, path, 1, 2, settings=settings).collect()] == [(2, "c", 21)]
    register(spark, settings)
    try:
        assert _rows(spark.read.format("paimon").load(path)) == [(1, "a", 10), (2, "c", 21)]
    finally:
        register(spark)  # the session's source as the other tests have it
