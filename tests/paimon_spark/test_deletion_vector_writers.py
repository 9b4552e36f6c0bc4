"""A deletion-vector table (with changelog-producer lookup) written by turns by us and by Paimon's own
Spark connector: each writer's compaction deletes the other's older rows through the vectors, and
Java's batch read, the connector's SQL read, ours and Paimon's streaming read of the changelog all
give the model (issue 40).

Fixed bucket (the connector's 0.9 writer and ours share Paimon's bucket hash). After a first commit
of many keys, each commit changes keys 1 and 2 and adds one: the changelog gives -U/+U for the stored
keys and +I for the new one, in the COMPACT snapshot that follows the write.
"""

from __future__ import annotations

from dbt_paimon.engine import upsert
from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.index.deletion_vectors import bucket_indexes, read_vectors
from tests.java_paimon.javapaimon import Changes, Read
from tests.oracle import rows

from .side_env import spark_sql_rows, sql_values, table_name

SPARK = "id bigint, v string"
OPTIONS = {"bucket": "2", "deletion-vectors.enabled": "true", "changelog-producer": "lookup"}


def test_ours_and_paimons_writer_keep_one_dv_table(spark, paimon_spark, java, warehouse):
    path = f"{warehouse}/db.db/dv_turns"
    wh, name = table_name(path)
    live: dict[int, str] = {}
    expected: list[list[tuple]] = []
    vectors_by: dict[str, int] = {"ours": 0, "paimon": 0}  # commits after which some vector is there
    for turn, writer in enumerate(["ours", "paimon", "ours", "paimon"]):
        # the first commit is the big one: later level-0 files are too small for universal compaction
        # to take the top level along, so their compactions keep vectors on it
        batch = {k: f"v{turn}" for k in ([1, 2, 10 + turn] if turn else range(1, 60))}
        if writer == "ours":
            upsert(spark.createDataFrame(list(batch.items()), SPARK), path, primary_keys="id", options=OPTIONS)
        else:
            paimon_spark.sql(wh, f"INSERT INTO {name} VALUES "
                             + sql_values([{"id": k, "v": v} for k, v in batch.items()]))
        expected.append(sorted([("-U", k, live[k]) for k in batch if k in live]
                               + [("+U", k, v) for k, v in batch.items() if k in live]
                               + [("+I", k, v) for k, v in batch.items() if k not in live]))
        live.update(batch)
        table = FileStoreTable.open(path)
        assert all(f.level > 0 for s in table.plan().splits for f in s.files), writer
        vectors_by[writer] += any(read_vectors(table.io, table.path, m)
                                  for m in bucket_indexes(table.io, table.path, table.latest_snapshot()).values())
    assert vectors_by["ours"] and vectors_by["paimon"]

    want = [{"id": k, "v": v} for k, v in sorted(live.items())]
    changes, java_read = java.run([Changes(path), Read(path)])
    for reader, got in (("java", rows(java_read, "id")), ("ours", rows(FileStoreTable.open(path).to_arrow(), "id")),
                        ("paimon's spark sql", spark_sql_rows(paimon_spark, path, ["id"]))):
        assert got == want, reader
    got: dict[int, list[tuple]] = {}
    for c in changes:
        got.setdefault(c["_snapshot"], []).append((c["_kind"], c["id"], c["v"]))
    assert [sorted(got[s]) for s in sorted(got)] == expected


def test_a_cross_partition_dv_table_the_connector_moved_keys_in(spark, paimon_spark, java, warehouse):
    """Our key index learns where the connector's writes left each key (its moves, each a -D in the
    old partition that its compaction turns into a deleted row), reading every bucket through its
    vectors: our next moves leave every key live once."""
    path = f"{warehouse}/db.db/dv_cross_turns"
    wh, name = table_name(path)
    options = {"bucket": "-1", "deletion-vectors.enabled": "true"}
    spark_cols = "id bigint, dt string, v string"
    live = {k: ("abc"[k % 3], "ours0") for k in range(1, 41)}
    upsert(spark.createDataFrame([(k, d, v) for k, (d, v) in live.items()], spark_cols), path, primary_keys="id",
           partition_keys="dt", options=options)
    theirs = {k: ("abc"[(k + 1) % 3], "paimon") for k in range(1, 11)}  # every one moves
    paimon_spark.sql(wh, f"INSERT INTO {name} VALUES " + sql_values(
        [{"id": k, "dt": d, "v": v} for k, (d, v) in theirs.items()], ["id", "dt", "v"]))
    live.update(theirs)
    table = FileStoreTable.open(path)
    assert any(read_vectors(table.io, table.path, m)  # the connector's compaction deleted rows by vectors
               for m in bucket_indexes(table.io, table.path, table.latest_snapshot()).values())
    ours = {k: ("abc"[(k + 2) % 3], "ours1") for k in range(5, 16)}  # moves the connector's keys again
    upsert(spark.createDataFrame([(k, d, v) for k, (d, v) in ours.items()], spark_cols), path, primary_keys="id",
           partition_keys="dt", options=options)
    live.update(ours)
    want = [{"id": k, "v": v, "dt": d} for k, (d, v) in sorted(live.items())]
    java_read, = java.run([Read(path)])
    for reader, got in (("java", rows(java_read, "id")), ("ours", rows(FileStoreTable.open(path).to_arrow(), "id")),
                        ("paimon's spark sql", spark_sql_rows(paimon_spark, path, ["id"]))):
        assert [{k: r[k] for k in ("id", "v", "dt")} for r in got] == want, reader
