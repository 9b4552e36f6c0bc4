"""Java Paimon (the reference release, reference.py) reads the tables we write and gets what our
reader, the model and pypaimon get: every bucket mode and merge engine, after compaction,
expiration and schema evolution, by tag.

Each fixture builds its tables, then runs all their Java reads in one JVM (a JVM start costs 1-2 s).
Where Java cannot read what we write, the test asserts the failure it shows (docs/java-paimon-oracle.md).
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import pyarrow as pa
import pytest

from dbt_paimon.store import FileStoreTable, PaimonError
from dbt_paimon.store.compaction.compact import compact_bucket
from dbt_paimon.store.schema.schema import SchemaManager
from tests.oracle import pypaimon_read, rows

from tests.paimon_spark.side_env import spark_sql_rows

from .data import KEY, PARTITION, SCHEMA, Model, random_rows
from .javapaimon import JavaError, Read, assert_same


def _db(tmp_path_factory, name: str):
    db = tmp_path_factory.mktemp(name) / "wh" / "db.db"  # <warehouse>/<db>.db/<table>, as Java's catalog wants
    db.mkdir(parents=True)
    return db


def _write(table: FileStoreTable, batch: list[dict], kinds=None) -> int:
    w = table.new_write()
    w.write(pa.Table.from_pylist(batch, table.schema.arrow_schema()), row_kinds=kinds)
    return w.commit().snapshot.id


def _compact_all(table: FileStoreTable) -> int:
    entries = [e for split in table.plan().splits for e in compact_bucket(table, split)]
    return table.new_commit().commit(entries, "COMPACT").snapshot.id


# ---- tables written by the store API ---------------------------------------------------------------

DENSE_SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("a", pa.int64()), ("s", pa.string()),
                          ("b", pa.int64()), ("c", pa.int64())])


@pytest.fixture(scope="module")
def store_tables(java, tmp_path_factory):
    db = _db(tmp_path_factory, "store")
    rng = random.Random(5)
    out = SimpleNamespace(expected={}, reads={})

    # Fixed bucket, every type: inserts, updates (with nulls), deletes; each snapshot read back.
    out.fixed = str(db / "fixed")
    fixed = FileStoreTable.create(out.fixed, SCHEMA, KEY, PARTITION, {"bucket": "3"})
    model = Model()
    for version, ids in ((1, range(120)), (2, range(0, 120, 3))):
        batch = random_rows(rng, ids, version)
        model.upsert(batch)
        out.expected[_write(fixed, batch)] = model.sorted_rows()
    gone = [r for r in model.sorted_rows() if r["id"] % 7 == 0]
    model.delete(gone)
    out.expected[_write(fixed, gone, kinds=[3] * len(gone))] = model.sorted_rows()
    for sid in out.expected:
        out.reads[f"fixed@{sid}"] = Read(out.fixed, {"scan.snapshot-id": str(sid)})

    # First-row: two level-0 writes, then a full compaction; the first version of a key wins.
    out.first_row = str(db / "first_row")
    first_row = FileStoreTable.create(out.first_row, SCHEMA, KEY, PARTITION,
                                      {"bucket": "2", "merge-engine": "first-row"})
    first, second = random_rows(rng, range(40), 1), random_rows(rng, range(20, 60), 2)
    _write(first_row, first)
    out.first_row_level0 = _write(first_row, second)
    _compact_all(first_row)
    out.first_row_expected = sorted(first + second[20:], key=lambda r: tuple(r[k] for k in KEY))
    out.reads["first_row@level0"] = Read(out.first_row, {"scan.snapshot-id": str(out.first_row_level0)})
    out.reads["first_row"] = Read(out.first_row)

    # Value stats of a first-row table, which Java's batch scan filters files by. `fields.a.stats-mode`
    # = none makes them dense (`_VALUE_STATS_COLS` lists the other columns); "sparse" keeps a slot for
    # every column (dense store off), the layout before Paimon 1.0.
    for name, extra in (("dense", {}), ("sparse", {"metadata.stats-dense-store": "false"})):
        path = str(db / name)
        setattr(out, name, path)
        table = FileStoreTable.create(path, DENSE_SCHEMA, ["id", "dt"], ["dt"], {
            "bucket": "1", "merge-engine": "first-row", "fields.a.stats-mode": "none", **extra})
        _write(table, [{"id": i, "dt": "x", "a": i, "s": f"s{i}", "b": 100 + i, "c": 1000 + i} for i in range(10)])
        _compact_all(table)
        out.reads[name] = Read(path)
        for column, value in (("b", 105), ("c", 1005), ("b", 2000)):
            out.reads[f"{name}:{column}={value}"] = Read(path, equal={column: value})

    out.java = dict(zip(out.reads, java.run(list(out.reads.values()))))
    return out


def test_fixed_bucket_table_of_every_type_at_each_snapshot(store_tables):
    t = store_tables
    table = FileStoreTable.open(t.fixed)
    for sid, expected in t.expected.items():
        assert_same(t.java[f"fixed@{sid}"], table.to_arrow(snapshot_id=sid), KEY, expected)
    # The latest snapshot really merges several files per bucket, and pypaimon agrees.
    assert max(len(s.files) for s in table.plan().splits) == 3
    assert rows(pypaimon_read(t.fixed), KEY) == list(t.expected.values())[-1]


def test_first_row_batch_read_sees_only_compacted_files(store_tables):
    """Paimon's batch scan of a first-row table skips level 0 (batchScanSkipLevel0): before the
    compaction Java sees nothing, and so does our reader."""
    t = store_tables
    table = FileStoreTable.open(t.first_row)
    assert t.java["first_row@level0"].num_rows == 0
    assert_same(t.java["first_row@level0"], table.to_arrow(snapshot_id=t.first_row_level0), KEY)
    assert_same(t.java["first_row"], table.to_arrow(), KEY, t.first_row_expected)


def test_value_stats_dense_and_sparse_prune_right(store_tables):
    """Our manifests' value stats, dense (`_VALUE_STATS_COLS`, Paimon's default since 1.0) and sparse, are
    what Java's filtered batch scan prunes files by (first-row tables, and deletion-vector tables, at level
    > 0): it keeps the file where a row can match and prunes it where none can, so the stats are really
    in use on this path and each column's bounds are read from its own slot. (Paimon 0.9 misread the dense
    layout by position; docs/java-paimon-oracle.md.)"""
    t = store_tables
    key = ["id"]
    ours = FileStoreTable.open(t.dense).to_arrow()
    [dense_file] = [f for s in FileStoreTable.open(t.dense).plan().splits for f in s.files]
    [sparse_file] = [f for s in FileStoreTable.open(t.sparse).plan().splits for f in s.files]
    assert dense_file.value_stats_cols == ("id", "dt", "s", "b", "c") and sparse_file.value_stats_cols is None
    assert 105 in ours.column("b").to_pylist()
    for layout in ("dense", "sparse"):
        assert_same(t.java[layout], FileStoreTable.open(getattr(t, layout)).to_arrow(), key, rows(ours, key))
        assert_same(t.java[f"{layout}:b=105"], ours, key)
        assert_same(t.java[f"{layout}:c=1005"], ours, key)
        assert t.java[f"{layout}:b=2000"].num_rows == 0


# ---- tables written by the Spark engine ------------------------------------------------------------

ENGINE_TABLES = {
    # name: (primary key, options, aggregate functions for the model)
    "fixed": (["id", "dt"], {"bucket": "2"}, {}),
    "dynamic": (["id", "dt"], {}, {}),
    "cross-deduplicate": (["id"], {}, {}),
    "cross-partial-update": (["id"], {"merge-engine": "partial-update"}, {}),
    "cross-aggregation": (["id"], {"merge-engine": "aggregation"},
                          {"v": "sum", "amount": "max", "s": "min", "flag": "bool_or", "seq": "count"}),
    "cross-aggregation-2": (["id"], {"merge-engine": "aggregation"},
                            {"v": "last_value", "amount": "min", "s": "last_non_null_value", "flag": "bool_and",
                             "seq": "first_non_null_value"}),
    "cross-first-row": (["id"], {"merge-engine": "first-row"}, {}),
}
# Small dynamic buckets, so a few dozen keys spread over several buckets per partition.
BASE_OPTIONS = {"dynamic-bucket.target-row-num": "4"}


# The cross-partition tables again, written by turns driver-local (its one assigner opens every
# bucket) and by the Spark job with 2, then 3 assigners, who write the rows they assign themselves
# (tasks.assign_write_task): buckets get a file from two assigners in one commit, with disjoint keys
# and overlapping sequence numbers, as Paimon's Levels allows ("two or more jobs writing the same
# merge tree"). (Not first-row: its keys never change bucket nor get a second row.)
SHARED_BUCKETS = {f"{name}-shared": ENGINE_TABLES[name] for name in
                  ("cross-deduplicate", "cross-partial-update", "cross-aggregation")}
SHARED_RUNS = [("local", None), ("distributed", 2), ("distributed", 3)]


@pytest.fixture(scope="module")
def engine_tables(spark, java, paimon_spark, paimon_spark_2, tmp_path_factory):
    from dbt_paimon.engine import RunSettings
    from dbt_paimon.engine import upsert
    from tests.engine.helpers import frame
    from tests.engine.model import UpsertModel, random_batches

    db = _db(tmp_path_factory, "engine")
    out = {}
    for name, (key, options, aggregates) in {**ENGINE_TABLES, **SHARED_BUCKETS}.items():
        path = str(db / name.replace("-", "_"))
        options = {**BASE_OPTIONS, **options, **{f"fields.{c}.aggregate-function": f for c, f in aggregates.items()}}
        model = UpsertModel(key, ["dt"], engine=options.get("merge-engine", "deduplicate"), aggregates=aggregates)
        moved, shared = 0, 0
        for i, batch in enumerate(random_batches(seed=len(out) % len(ENGINE_TABLES), batches=3, size=30, key_space=45)):
            moved += model.apply(batch)["moved"]
            execution, assigners = SHARED_RUNS[i] if name in SHARED_BUCKETS else ("auto", None)
            run = {"dynamic-bucket.assigner-parallelism": str(assigners)} if assigners else {}
            result = upsert(frame(spark, batch), path, primary_keys=key, partition_keys="dt",
                            options={**options, **run}, settings=RunSettings(execution=execution))
            if assigners:
                shared += _buckets_written_twice(path, result.snapshot_id)
        out[name] = SimpleNamespace(path=path, key=key, expected=model.sorted_rows(), moved=moved, shared=shared)
    for case, result in zip(out.values(), java.run([Read(c.path) for c in out.values()])):
        case.java = result
        # Paimon's Spark connectors: 0.9 (Spark 3.5) and 2.0 (Spark 4.0)
        case.spark_sql = {line.line.name: spark_sql_rows(line, case.path, case.key)
                          for line in (paimon_spark, paimon_spark_2)}
    return out


def _buckets_written_twice(path: str, snapshot_id: int) -> int:
    """The buckets that got more than one file in the commit of snapshot_id."""
    table = FileStoreTable.open(path)
    before = {f.file_name for s in table.plan(snapshot_id=snapshot_id - 1).splits for f in s.files}
    return sum(len([f for f in s.files if f.file_name not in before]) > 1
               for s in table.plan(snapshot_id=snapshot_id).splits)


@pytest.mark.parametrize("name", list(ENGINE_TABLES) + list(SHARED_BUCKETS))
def test_engine_written_table(engine_tables, name):
    case = engine_tables[name]
    if name in SHARED_BUCKETS:
        assert case.shared > 0  # some bucket really got files from two assigners in one commit
    table = FileStoreTable.open(case.path)
    assert_same(case.java, table.to_arrow(), case.key, case.expected)
    assert rows(pypaimon_read(case.path), case.key) == case.expected
    assert case.spark_sql == {"0.9": case.expected, "2.0": case.expected}
    if name.startswith("cross-deduplicate"):
        assert case.moved > 0  # keys really changed partition (a DELETE in the old one, a row in the new)
    if name != "fixed":
        assert table.schema.core.bucket == -1
        assert len({(s.partition, s.bucket) for s in table.plan().splits}) > 3


# ---- one table through compaction, expiration, schema evolution and a tag ---------------------------

EVOLVED_COLUMNS = ["id", "dt", "v", "s", "amount", "seq", "note"]  # flag dropped, amount INT -> BIGINT, note added
EVOLVED_SPARK_SCHEMA = "id bigint, dt string, v bigint, s string, amount bigint, seq bigint, note string"


@pytest.fixture(scope="module")
def maintained(spark, java, paimon_spark, paimon_spark_2, tmp_path_factory):
    """A cross-partition table: 3 upserts, tag v1, an upsert, expiration down to one snapshot (the
    tagged one included), a schema change, an upsert in the new schema, a full compaction."""
    from pyspark.sql import types as T

    from dbt_paimon.engine.writes import schema_change
    from dbt_paimon.engine import compact
    from dbt_paimon.engine import upsert
    from dbt_paimon.store.common.types import DataType
    from tests.engine.helpers import COLUMNS, SCHEMA as SPARK_SCHEMA, frame
    from tests.engine.model import UpsertModel, random_batches

    out = SimpleNamespace(path=str(_db(tmp_path_factory, "maintained") / "t"), expected={}, snapshot={})
    model = UpsertModel(["id"], ["dt"])
    batches = random_batches(seed=41, batches=5, size=30, key_space=45)

    def up(batch, spark_schema=SPARK_SCHEMA) -> int:
        model.apply(batch)
        upsert(frame(spark, batch, spark_schema), out.path, primary_keys="id", partition_keys="dt",
               options=BASE_OPTIONS)
        return FileStoreTable.open(out.path).latest_snapshot().id

    for batch in batches[:3]:
        up(batch)
    table = FileStoreTable.open(out.path)
    out.snapshot["v1"] = table.create_tag("v1").snapshot.id
    out.expected["v1"] = [{c: r.get(c) for c in COLUMNS} for r in model.sorted_rows()]
    out.snapshot["pre_evolution"] = up(batches[3])
    out.expected["pre_evolution"] = [{c: r.get(c) for c in COLUMNS} for r in model.sorted_rows()]
    out.expired = table.expire_snapshots(retain_max=1, retain_min=1).expired

    schema_change.commit(out.path, schema_change.evolve(table.schema, add=[T.StructField("note", T.StringType())],
                                                drop=["flag"], retype={"amount": DataType("BIGINT")}))
    evolved = [{**{c: r[c] for c in COLUMNS if c != "flag"}, "note": f"n{r['id']}"} for r in batches[4]]
    out.snapshot["pre_compaction"] = up(evolved, EVOLVED_SPARK_SCHEMA)
    out.expected["latest"] = [{c: r.get(c) for c in EVOLVED_COLUMNS} for r in model.sorted_rows()]
    out.snapshot["latest"] = compact(spark, out.path)

    out.reads = {"latest": Read(out.path), "v1": Read(out.path, {"scan.tag-name": "v1"}),
                 "expired": Read(out.path, {"scan.snapshot-id": "1"})}
    for name in ("pre_evolution", "pre_compaction"):
        out.reads[name] = Read(out.path, {"scan.snapshot-id": str(out.snapshot[name])})
    out.java = dict(zip(out.reads, java.run(list(out.reads.values()))))
    travels = (("latest", None), ("v1", "'v1'"), ("pre_evolution", out.snapshot["pre_evolution"]),
               ("pre_compaction", out.snapshot["pre_compaction"]))
    out.spark_sql = {name: spark_sql_rows(paimon_spark, out.path, ["id"], as_of) for name, as_of in travels}
    out.spark_sql_2 = {name: spark_sql_rows(paimon_spark_2, out.path, ["id"], as_of) for name, as_of in travels}
    return out


def _ours_as_of(path: str, snapshot_id: int | None = None, tag: str | None = None) -> pa.Table:
    """Our reader travelling as Paimon does: with the schema of that snapshot, not the latest one."""
    table = FileStoreTable.open(path)
    snapshot = table.tags.get_or_throw(tag).snapshot if tag else table.snapshots.snapshot(snapshot_id)
    then = FileStoreTable(path, SchemaManager(table.io, path).schema(snapshot.schema_id))
    return then.to_arrow(snapshot_id=snapshot_id, tag=tag)


def test_after_schema_evolution_and_compaction(maintained):
    m = maintained
    table = FileStoreTable.open(m.path)
    assert table.schema.field_names == EVOLVED_COLUMNS and m.java["latest"].schema.field("amount").type == pa.int64()
    assert_same(m.java["latest"], table.to_arrow(), ["id"], m.expected["latest"])
    latest = table.plan(snapshot_id=m.snapshot["latest"])
    assert table.latest_snapshot().commit_kind == "COMPACT"
    assert {f.level for s in latest.splits for f in s.files} == {table.schema.core.num_levels - 1}
    # Before the compaction, files of both schemas were live: Java mapped the old ones by field id.
    before = table.plan(snapshot_id=m.snapshot["pre_compaction"])
    assert {f.schema_id for s in before.splits for f in s.files} == {0, 1}
    assert_same(m.java["pre_compaction"], table.to_arrow(snapshot_id=m.snapshot["pre_compaction"]), ["id"],
                m.expected["latest"])
    assert m.spark_sql["latest"] == m.spark_sql["pre_compaction"] == m.expected["latest"]
    assert m.spark_sql_2["latest"] == m.spark_sql_2["pre_compaction"] == m.expected["latest"]


def test_time_travel_reads_with_the_snapshots_schema(maintained):
    m = maintained
    java = m.java["pre_evolution"]
    assert java.schema.names == ["id", "dt", "v", "s", "amount", "flag", "seq"]
    assert java.schema.field("amount").type == pa.int32()
    assert_same(java, _ours_as_of(m.path, snapshot_id=m.snapshot["pre_evolution"]), ["id"],
                m.expected["pre_evolution"])
    assert m.spark_sql["pre_evolution"] == m.spark_sql_2["pre_evolution"] == m.expected["pre_evolution"]


def test_our_store_time_travel_uses_the_snapshots_schema(maintained):
    m = maintained
    ours = FileStoreTable.open(m.path).to_arrow(snapshot_id=m.snapshot["pre_evolution"])
    assert ours.schema.names == m.java["pre_evolution"].schema.names


def test_tag_whose_snapshot_expired(maintained):
    m = maintained
    assert m.snapshot["v1"] in m.expired  # the tag alone keeps its files
    assert_same(m.java["v1"], _ours_as_of(m.path, tag="v1"), ["id"], m.expected["v1"])
    assert m.spark_sql["v1"] == m.spark_sql_2["v1"] == m.expected["v1"]


def test_expired_snapshot_is_gone_for_both(maintained):
    m = maintained
    assert 1 in m.expired
    error = m.java["expired"]
    assert isinstance(error, JavaError) and "scan snapshotId 1 is out of available snapshotId range" in str(error)
    with pytest.raises(PaimonError, match="snapshot 1 does not exist"):
        FileStoreTable.open(m.path).to_arrow(snapshot_id=1)
