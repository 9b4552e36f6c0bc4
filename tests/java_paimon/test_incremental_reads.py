"""Incremental reads (`incremental-between`, its scan modes auto, delta and changelog) and the
`audit_log` system table of our tables give Java Paimon's records: the same records, kinds and
values, of every range of a random history with deletes; on key tables without and with changelog
producers (input; lookup, whose changelog comes with compactions), partitioned and not, and on
append tables; through the store and the `paimon` source. Ends that are not there are errors naming
the snapshots there are, as Java refuses them."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from dbt_paimon.engine import delete, upsert
from dbt_paimon.store import FileStoreTable, PaimonError
from tests.java_paimon.javapaimon import JavaError, Read

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("dt", pa.string())])
MODES = ("auto", "delta", "changelog")


def _records(table: pa.Table) -> list[tuple]:
    return sorted(zip(table.column("rowkind").to_pylist(), table.column("id").to_pylist(),
                      table.column("v").to_pylist()))


def _java_records(found) -> list[tuple]:
    return sorted((r["_kind"], r["id"], r["v"]) for r in found)


def _rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.select("rowkind", "id", "v").collect())


def _audit_logs_agree(java, table: FileStoreTable, spark=None) -> int:
    """The audit log of the latest snapshot and of the first: ours (store, and with `spark` the
    source, also of each incremental range) and Java's."""
    first = table.snapshots.earliest_id()
    requests = [Read(table.path + "$audit_log"), Read(table.path + "$audit_log", {"scan.snapshot-id": str(first)})]
    latest, at_first = java.run(requests)
    for theirs, ours in ((latest, table.audit_log()), (at_first, table.audit_log(snapshot_id=first))):
        assert _records(ours) == sorted(zip(*(theirs.column(c).to_pylist() for c in ("rowkind", "id", "v"))))
    if spark is not None:
        source = spark.read.format("paimon")
        assert _rows(source.load(table.path + "$audit_log")) == _records(table.audit_log())
        end = table.snapshots.latest_id()
        assert _rows(source.option("incremental-between", f"1,{end}").load(table.path + "$audit_log")) == \
            _records(table.read_between(1, end))
    return latest.num_rows


def _ranges(latest: int) -> list[tuple[int, int]]:
    return [(0, latest), (1, latest), (latest - 1, latest), (1, 2), (2, latest - 1)]


def _compare(java, table: FileStoreTable, modes=MODES, spark=None) -> int:
    """Ours and Java's records of every range and mode; with `spark`, the `paimon` source's rows too:
    Java's inserted and updated records (a DataFrame has no retractions, as in Paimon's connector)."""
    latest = table.snapshots.latest_id()
    cases = [(r, m) for r in _ranges(latest) for m in modes]
    found = java.run([Read(table.path, {"incremental-between": f"{s},{e}", "incremental-between-scan-mode": m},
                           records=True) for (s, e), m in cases])
    records = 0
    for ((start, end), mode), theirs in zip(cases, found):
        assert not isinstance(theirs, JavaError), theirs
        ours = _records(table.read_between(start, end, mode))
        assert ours == _java_records(theirs), (start, end, mode)
        records += len(ours)
        if spark is not None:
            rows = (spark.read.format("paimon").option("incremental-between", f"{start},{end}")
                    .option("incremental-between-scan-mode", mode).load(table.path).select("id", "v").collect())
            assert sorted(map(tuple, rows)) == sorted((i, v) for k, i, v in ours if k in ("+I", "+U")), (start, end)
    return records


@pytest.mark.parametrize("producer", ["none", "input"])
@pytest.mark.parametrize("partitioned", [False, True])
def test_store_written_histories_read_incrementally_as_java_reads_them(java, warehouse, producer, partitioned):
    rnd = random.Random(f"{producer}{partitioned}")
    path = f"{warehouse}/db.db/t_{producer}_{int(partitioned)}"
    FileStoreTable.create(path, SCHEMA, primary_keys=["id", "dt"] if partitioned else ["id"],
                          partition_keys=["dt"] if partitioned else [],
                          options={"bucket": "2", "changelog-producer": producer})
    for s in range(5):
        table = FileStoreTable.open(path)
        ids = rnd.sample(range(20), 6)
        write = table.new_write()
        write.write(pa.table({"id": ids, "v": [f"v{s}-{i}" for i in ids], "dt": [f"d{i % 2}" for i in ids]}),
                    row_kinds=[rnd.choice([0, 2, 3]) for _ in ids])  # +I, +U, -D
        write.commit()
    assert _compare(java, FileStoreTable.open(path)) > 0
    assert _audit_logs_agree(java, FileStoreTable.open(path)) > 0


def test_an_append_tables_rows_read_incrementally_as_java_reads_them(java, warehouse):
    path = f"{warehouse}/db.db/log"
    FileStoreTable.create(path, SCHEMA, primary_keys=[], partition_keys=["dt"], options={"bucket": "-1"})
    for s in range(4):
        table = FileStoreTable.open(path)
        write = table.new_write()
        write.write(pa.table({"id": [s, s + 10], "v": [f"v{s}", f"w{s}"], "dt": ["a", "b"]}))
        write.commit()
    # 2 modes x 2 rows per snapshot x the snapshots of the ranges (0,4) (1,4) (3,4) (1,2) (2,3)
    assert _compare(java, FileStoreTable.open(path), modes=("auto", "delta")) == 2 * 2 * (4 + 3 + 1 + 1 + 1)
    assert _audit_logs_agree(java, FileStoreTable.open(path)) == 8
    with pytest.raises(PaimonError, match="an append table has no changelog"):
        FileStoreTable.open(path).read_between(0, 2, "changelog")


def test_the_lookup_producers_changelog_from_our_upserts_and_deletes(java, spark, warehouse):
    """Upserts, a delete and their compactions on a `changelog-producer: lookup` table: the
    changelog comes with each COMPACT commit, the delta with each APPEND commit."""
    path = f"{warehouse}/db.db/looked_up"
    options = {"bucket": "2", "changelog-producer": "lookup"}
    for batch in ([(1, "a", "x"), (2, "b", "x"), (3, "c", "y")], [(2, "b2", "x"), (4, "d", "y")],
                  [(1, "a3", "x"), (2, "b2", "x")]):
        upsert(spark.createDataFrame(batch, "id BIGINT, v STRING, dt STRING"), path, primary_keys="id",
               options=options)
    delete(spark, path, "id = 3")
    table = FileStoreTable.open(path)
    kinds = [table.snapshots.snapshot(i).commit_kind for i in range(1, table.snapshots.latest_id() + 1)]
    assert "COMPACT" in kinds and "APPEND" in kinds
    assert _compare(java, table, spark=spark) > 0
    # keys 1, 2, 4: the compaction after the delete wrote the top level, which keeps no -D record
    assert _audit_logs_agree(java, table, spark=spark) == 3
    changelog = _records(table.read_between(0, table.snapshots.latest_id()))  # auto: the changelog
    assert ("-D", 3, "c") in changelog and ("+U", 1, "a3") in changelog and ("-U", 1, "a") in changelog


def test_ends_that_are_not_there_are_refused_naming_what_is(java, warehouse):
    path = f"{warehouse}/db.db/short"
    FileStoreTable.create(path, SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    for s in range(3):
        table = FileStoreTable.open(path)
        write = table.new_write()
        write.write(pa.table({"id": [s], "v": [str(s)], "dt": ["a"]}))
        write.commit()
    table = FileStoreTable.open(path)
    theirs = java.run([Read(path, {"incremental-between": "1,5"}, records=True)])[0]
    assert isinstance(theirs, JavaError)
    with pytest.raises(PaimonError, match=r"incremental-between 1,5: the table has snapshots 1..3"):
        table.read_between(1, 5)
    table.expire_snapshots(retain_max=1, retain_min=1)
    with pytest.raises(PaimonError, match=r"the table has snapshots 3..3 .*snapshot 2 must still be there"):
        FileStoreTable.open(path).read_between(1, 3)
    assert _records(FileStoreTable.open(path).read_between(2, 3)) == [("+I", 2, "2")]
    with pytest.raises(PaimonError, match="'diff' is not read by dbt-paimon yet"):
        table.read_between(1, 2, "diff")
    with pytest.raises(PaimonError, match="scan-mode must be one of auto, delta, changelog, got 'everything'"):
        table.read_between(1, 2, "everything")


def test_the_source_refuses_what_it_does_not_read(spark, warehouse):
    path = f"{warehouse}/db.db/t"
    upsert(spark.createDataFrame([(1, "a", "x")], "id BIGINT, v STRING, dt STRING"), path, primary_keys="id")
    for options, words in (({"incremental-between": "tag1,tag2"}, "does not read tag names there yet"),
                           ({"incremental-between": "0,1", "snapshot-id": "1"}, "not both"),
                           ({"incremental-between": "0,1", "incremental-between-scan-mode": "diff"}, "'diff'")):
        with pytest.raises(Exception, match=words):
            spark.read.format("paimon").options(**options).load(path).collect()
    assert spark.read.format("paimon").option("incremental-between", "0,1").load(path).collect() == [(1, "a", "x")]


def test_metadata_system_tables_are_javas(java, spark, warehouse):
    """options, schemas (after a schema change), manifests and consumers (one Java's reader left) of our
    table: the rows Java Paimon's system tables give, through the store and the `paimon` source."""
    from dbt_paimon.store import system_tables
    from tests.java_paimon.javapaimon import Changes

    path = f"{warehouse}/db.db/meta"
    options = {"bucket": "2", "changelog-producer": "input", "snapshot.num-retained.min": "2"}
    upsert(spark.createDataFrame([(1, "a", "x"), (2, "b", "y")], "id BIGINT, v STRING, dt STRING"), path,
           primary_keys=["id", "dt"], partition_keys="dt", options=options)
    from pyspark.sql import types as T

    from dbt_paimon.engine import schema_change
    schema_change.commit(path, schema_change.evolve(FileStoreTable.open(path).schema,
                                                    add=[T.StructField("n", T.IntegerType())]))  # schema 1
    upsert(spark.createDataFrame([(3, "c", "x", 7)], "id BIGINT, v STRING, dt STRING, n INT"), path,
           primary_keys=["id", "dt"], partition_keys="dt", options=options)
    java.run([Changes(path, start=1, consumer="downstream")])
    table = FileStoreTable.open(path)
    names = ("options", "schemas", "manifests", "consumers")
    theirs = dict(zip(names, java.run([Read(f"{path}${n}") for n in names])))
    assert theirs["consumers"].num_rows == 1 and theirs["schemas"].num_rows == 2
    for name in names:
        ours = system_tables.read(table, name)
        expected = theirs[name].select(ours.column_names).to_pylist()
        key = ours.column_names[0]
        assert sorted(ours.to_pylist(), key=lambda r: r[key]) == sorted(expected, key=lambda r: r[key]), name
        via_spark = spark.read.format("paimon").load(f"{path}${name}").collect()
        assert sorted(r.asDict()[key] for r in via_spark) == sorted(r[key] for r in expected), name
