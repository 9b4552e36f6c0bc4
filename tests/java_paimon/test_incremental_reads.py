"""Incremental reads (`incremental-between` with snapshot ids or tag names, `-timestamp`, the scan
modes auto, delta, changelog and diff, `-tag-to-snapshot`) and the `audit_log` system table of our
tables give Java Paimon's records: the same records, kinds and values, of every range of a random
history with deletes; on key tables without and with changelog producers (input; lookup, whose
changelog comes with compactions), partitioned and not, and on append tables; through the store and
the `paimon` source. Ends that are not there are errors naming the snapshots there are, as Java
refuses them."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from dbt_paimon.engine import changes, compact, delete, upsert
from dbt_paimon.engine.writes.delete import update_append
from dbt_paimon.store import FileStoreTable, PaimonError
from tests.engine.helpers import CHANGES_SCHEMA, change_records, random_history
from tests.java_paimon.incremental_oracle import audit_logs_agree, compare_with_java, java_records, source_rows
from tests.java_paimon.javapaimon import JavaError, Read

SCHEMA = CHANGES_SCHEMA


@pytest.mark.parametrize("producer", ["none", "input"])
@pytest.mark.parametrize("partitioned", [False, True])
def test_store_written_histories_read_incrementally_as_java_reads_them(java, warehouse, producer, partitioned):
    path = f"{warehouse}/db.db/t_{producer}_{int(partitioned)}"
    random_history(path, f"{producer}{partitioned}", producer, partitioned)
    assert compare_with_java(java, FileStoreTable.open(path)) > 0
    assert audit_logs_agree(java, FileStoreTable.open(path)) > 0


def _append_table(path: str, commits: int) -> None:
    """An append table partitioned by dt, of `commits` commits of two rows (one per partition)."""
    FileStoreTable.create(path, SCHEMA, primary_keys=[], partition_keys=["dt"], options={"bucket": "-1"})
    for s in range(commits):
        write = FileStoreTable.open(path).new_write()
        write.write(pa.table({"id": [s, s + 10], "v": [f"v{s}", f"w{s}"], "dt": ["a", "b"]}))
        write.commit()


def test_an_append_tables_rows_read_incrementally_as_java_reads_them(java, warehouse):
    path = f"{warehouse}/db.db/log"
    _append_table(path, 4)
    # 2 modes x 2 rows per snapshot x the snapshots of the ranges (0,4) (1,4) (3,4) (1,2) (2,3); the
    # changelog mode reads none: an append table has no changelog files, as a key table without a producer
    assert compare_with_java(java, FileStoreTable.open(path)) == 2 * 2 * (4 + 3 + 1 + 1 + 1)
    assert audit_logs_agree(java, FileStoreTable.open(path)) == 8
    assert FileStoreTable.open(path).read_between(0, 2, "changelog").num_rows == 0


def test_an_append_tables_rewrites_are_overwrites_its_changes_skip(java, spark, warehouse):
    """A DELETE and an UPDATE on an append table write the files holding their rows again: Paimon
    commits that as OVERWRITE, which its incremental reads skip. Committed as APPEND (as we did), the
    rewritten rows were read as new ones: Java refused the range, a changes reader doubled them."""
    path = f"{warehouse}/db.db/log_rewritten"
    _append_table(path, 3)
    delete(spark, path, "id = 1")
    update_append(spark, path, "id = 12", {"v": "'changed'"})
    table = FileStoreTable.open(path)
    assert [table.snapshots.snapshot(i).commit_kind for i in range(1, 6)] == ["APPEND"] * 3 + ["OVERWRITE"] * 2
    # 2 modes x the rows the APPEND commits of the ranges (0,5) (1,5) (4,5) (1,2) (2,4) wrote
    assert compare_with_java(java, table, spark=spark) == 2 * (6 + 4 + 0 + 2 + 2)
    with pytest.raises(PaimonError, match="overwrote rows of an append table"):
        changes(spark, path, 2, 5)


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
    assert compare_with_java(java, table, spark=spark) > 0
    # keys 1, 2, 4: the compaction after the delete wrote the top level, which keeps no -D record
    assert audit_logs_agree(java, table, spark=spark) == 3
    changelog = change_records(table.read_between(0, table.snapshots.latest_id()))  # auto: the changelog
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
    assert change_records(FileStoreTable.open(path).read_between(2, 3)) == [("+I", 2, "2")]
    with pytest.raises(PaimonError, match="snapshot 1 is not there .*a diff reads both ends"):
        table.read_between(1, 3, "diff")
    with pytest.raises(PaimonError, match="scan-mode must be one of auto, delta, changelog, diff; got 'everything'"):
        table.read_between(1, 3, "everything")


def test_the_source_refuses_what_it_does_not_read(spark, warehouse):
    path = f"{warehouse}/db.db/t"
    upsert(spark.createDataFrame([(1, "a", "x")], "id BIGINT, v STRING, dt STRING"), path, primary_keys="id")
    for options, words in (({"incremental-between": "tag1,tag2"}, "found no two tags of these names"),
                           ({"incremental-between": "0,1", "snapshot-id": "1"}, "not both"),
                           ({"incremental-between": "0,1", "incremental-between-scan-mode": "diff"},
                            "snapshot 0 is not there")):
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


def _history(path, producer="none", deletion_vectors=False):
    rnd = random.Random(f"diff{producer}{deletion_vectors}")
    FileStoreTable.create(path, SCHEMA, primary_keys=["id"], partition_keys=[],
                          options={"bucket": "2", "changelog-producer": producer,
                                   "deletion-vectors.enabled": str(deletion_vectors).lower()})
    for s in range(5):
        table = FileStoreTable.open(path)
        ids = rnd.sample(range(20), 8)
        write = table.new_write()
        write.write(pa.table({"id": ids, "v": [f"v{s}-{i}" if i % 3 else "same" for i in ids], "dt": ["a"] * 8}),
                    row_kinds=[rnd.choice([0, 2, 3]) for _ in ids])  # +I, +U, -D
        write.commit()
    return FileStoreTable.open(path)


def test_diff_tags_and_timestamps_read_as_java_reads_them(java, spark, warehouse):
    """diff mode (a plain read: the rows added or changed; the audit log: deletes too), two tags
    (their diff; with tag-to-snapshot, the records between), timestamps (delta and diff): each case
    through the store, Java's reader and the `paimon` source."""
    table = _history(f"{warehouse}/db.db/diffed")
    table.create_tag("t2", 2)
    table.create_tag("t5", 5)
    times = {i: table.snapshots.snapshot(i).time_millis for i in range(1, 6)}
    cases = [{"incremental-between": f"{s},{e}", "incremental-between-scan-mode": "diff"}
             for s, e in ((1, 5), (2, 4), (4, 5), (3, 3))]
    cases += [{"incremental-between": "t2,t5"},
              {"incremental-between": "t2,t5", "incremental-between-tag-to-snapshot": "true"},
              {"incremental-between-timestamp": f"{times[2]},{times[4]}"},
              {"incremental-between-timestamp": f"{times[1] - 1},{times[3]}"},
              {"incremental-between-timestamp": f"{times[2]},{times[5]}", "incremental-between-scan-mode": "diff"},
              {"incremental-between-timestamp": f"{times[5] + 1},{times[5] + 9}"}]
    requests = [Read(table.path, c, records=True) for c in cases] + [Read(table.path + "$audit_log", c) for c in cases]
    found = java.run(requests)
    plain, audit = found[:len(cases)], found[len(cases):]
    changed = 0
    for options, theirs, their_log in zip(cases, plain, audit):
        assert not isinstance(theirs, JavaError), (options, theirs)
        ours = change_records(table.read_incremental(options))
        assert ours == sorted(zip(*(their_log.column(c).to_pylist() for c in ("rowkind", "id", "v")))), options
        tags = options.get("incremental-between", "").startswith("t")
        diff = options.get("incremental-between-scan-mode") == "diff" or (
            tags and "incremental-between-tag-to-snapshot" not in options)
        # a plain read of a diff drops deletes (Paimon's IncrementalDiffSplitRead); of records, keeps every kind
        assert [r for r in ours if not diff or r[0] in ("+I", "+U")] == java_records(theirs), options
        rows = spark.read.format("paimon").options(**options).load(table.path).select("id", "v").collect()
        assert sorted(map(tuple, rows)) == sorted((i, v) for k, i, v in ours if k in ("+I", "+U")), options
        logged = spark.read.format("paimon").options(**options).load(table.path + "$audit_log")
        assert source_rows(logged) == ours, options
        changed += len(ours)
    assert changed > 0
    # a diff keeps a key rewritten with its old values out, and tells deletes (the audit log) apart
    diff = change_records(table.read_incremental({"incremental-between": "1,5",
                                                  "incremental-between-scan-mode": "diff"}))
    assert {k for k, _, _ in diff} <= {"+I", "+U", "-D"} and any(k == "-D" for k, _, _ in diff)


def test_a_diff_of_a_deletion_vector_table_and_a_changelog_table_is_javas(java, warehouse):
    for name, producer, dv in (("dv", "none", True), ("input", "input", False)):
        table = _history(f"{warehouse}/db.db/diff_{name}", producer, dv)
        cases = [{"incremental-between": f"{s},{e}", "incremental-between-scan-mode": "diff"}
                 for s, e in ((1, 5), (3, 5))]
        for options, their_log in zip(cases, java.run([Read(table.path + "$audit_log", c) for c in cases])):
            assert not isinstance(their_log, JavaError), their_log
            assert change_records(table.read_incremental(options)) == sorted(
                zip(*(their_log.column(c).to_pylist() for c in ("rowkind", "id", "v")))), (name, options)


def test_the_read_optimized_table_is_javas(java, spark, warehouse):
    """`$ro`: the top level only, after a full compaction and an upsert since (which `ro` does not see)."""
    path = f"{warehouse}/db.db/read_optimized"
    frame = spark.createDataFrame([(i, f"v{i}", "x") for i in range(6)], "id BIGINT, v STRING, dt STRING")
    upsert(frame, path, primary_keys="id", options={"bucket": "2"})
    compact(spark, path)
    upsert(spark.createDataFrame([(1, "new", "x"), (9, "nine", "x")], "id BIGINT, v STRING, dt STRING"), path,
           primary_keys="id", options={"bucket": "2"})
    table = FileStoreTable.open(path)
    (theirs,) = java.run([Read(path + "$ro")])
    ours = sorted(zip(*(table.read_optimized().column(c).to_pylist() for c in ("id", "v"))))
    assert ours == sorted(zip(theirs.column("id").to_pylist(), theirs.column("v").to_pylist()))
    assert ours == [(i, f"v{i}") for i in range(6)]
    source = spark.read.format("paimon").load(path + "$ro").select("id", "v").collect()
    assert sorted(map(tuple, source)) == ours


def test_the_binlog_is_javas(java, spark, warehouse):
    """`$binlog`: the audit log with each value in an array (one value each in a batch read)."""
    table = _history(f"{warehouse}/db.db/binlogged", "input")
    cases = [{}, {"incremental-between": "1,4"}]
    for options, theirs in zip(cases, java.run([Read(table.path + "$binlog", c) for c in cases])):
        assert not isinstance(theirs, JavaError), theirs
        ours = spark.read.format("paimon").options(**options).load(table.path + "$binlog")
        assert ours.columns == theirs.column_names
        mine = sorted((r.rowkind, tuple(r.id), tuple(r.v)) for r in ours.collect())
        java_rows = sorted((k, tuple(i), tuple(v)) for k, i, v in zip(
            *(theirs.column(c).to_pylist() for c in ("rowkind", "id", "v"))))
        assert mine == java_rows and mine, options
