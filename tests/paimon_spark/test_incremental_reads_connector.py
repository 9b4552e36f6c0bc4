"""Paimon's Spark connector reads our tables' changes as we do: `incremental-between` (every range of a
random history with deletes, in the scan modes auto, delta, changelog and diff) and the `audit_log` system
table, on a key table without a changelog producer and with `input`, partitioned, written by the
store. Its rows through `t$audit_log` with `spark.paimon.incremental-between` (the connector's way to
show row kinds) are the records of our `read_between`, kinds and values; its `t$audit_log` is our
`audit_log()`. Then engine-written histories of five cells of tests/engine/change_histories.py, which
between them hold every merge engine, every changelog producer and every bucket mode (Java Paimon reads
all 17: tests/java_paimon/test_incremental_matrix.py).

Paimon 2.0's connector: 0.9's does not apply `incremental-between` to `$audit_log` (its rows there
differ from the range's records), so a range's row kinds need the current release.
"""

from __future__ import annotations

import pytest

import pyarrow as pa

from dbt_paimon.engine import delete
from dbt_paimon.store import FileStoreTable
from tests.engine.change_histories import BUCKETS, ENGINES, PRODUCERS, engine_history
from tests.engine.helpers import CHANGES_SCHEMA, change_records, random_history

from .side_env import CURRENT_RELEASE_ONLY, table_name

MODES = ("auto", "delta", "changelog", "diff")
# (engine, producer, bucket mode): every engine, producer and bucket mode once
CELLS = [("deduplicate", "lookup", "dynamic"), ("partial-update", "full-compaction", "dynamic"),
         ("aggregation", "input", "fixed"), ("aggregation", "none", "cross-partition"),
         ("first-row", "lookup", "cross-partition")]


def _theirs(paimon_spark, path: str, settings: dict) -> list[tuple]:
    """The connector's `t$audit_log` under the session's `spark.paimon.*` settings, as records."""
    wh, name = table_name(path)
    for key, value in settings.items():
        paimon_spark.sql(wh, f"SET `spark.paimon.{key}` = {value}")
    try:
        db, table = name.split(".")
        found = paimon_spark.sql(wh, f"SELECT rowkind, id, v FROM {db}.`{table}$audit_log`")
    finally:
        for key in settings:
            paimon_spark.sql(wh, f"RESET `spark.paimon.{key}`")
    return sorted((r["rowkind"], r["id"], r["v"]) for r in found)


def _compare(paimon_spark, table, ranges) -> int:
    """Each range in each mode: the connector's records are our `read_between`'s. How many records
    were compared."""
    compared = 0
    for start, end in ranges:
        for mode in MODES:
            if mode == "changelog" and table.schema.core.changelog_producer == "none":
                continue  # no changelog files: Paimon reads nothing, we refuse (test_incremental_reads)
            if mode == "diff" and start == 0:
                continue  # a diff reads both ends' snapshots: 0 is none
            ours = change_records(table.read_between(start, end, mode))
            theirs = _theirs(paimon_spark, table.path, {"incremental-between": f"{start},{end}",
                                                        "incremental-between-scan-mode": mode})
            assert theirs == ours, (start, end, mode)
            compared += len(ours)
    return compared


@pytest.mark.parametrize("producer", ["none", "input"])
@CURRENT_RELEASE_ONLY
def test_the_connector_reads_our_changes_as_we_do(paimon_spark, warehouse, producer):
    table = random_history(f"{warehouse}/db.db/changes_{producer}", f"connector-{producer}", producer,
                           partitioned=True)
    latest = table.snapshots.latest_id()
    assert _compare(paimon_spark, table, ((0, latest), (1, latest), (latest - 1, latest), (1, 2), (2, latest - 1))) > 0
    assert _theirs(paimon_spark, table.path, {}) == change_records(table.audit_log())


def test_the_cells_hold_every_engine_producer_and_bucket_mode():
    assert [{c[i] for c in CELLS} for i in range(3)] == [set(ENGINES), set(PRODUCERS), set(BUCKETS)]


@pytest.mark.parametrize("engine, producer, mode", CELLS, ids=["-".join(c) for c in CELLS])
@CURRENT_RELEASE_ONLY
def test_the_connector_reads_each_engine_producer_and_bucket_modes_changes_as_we_do(paimon_spark, spark, warehouse,
                                                                                      engine, producer, mode):
    table = engine_history(spark, f"{warehouse}/db.db/cell", engine, producer, mode)
    latest = table.snapshots.latest_id()
    _compare(paimon_spark, table, ((0, latest), (1, latest), (latest - 2, latest)))
    assert _theirs(paimon_spark, table.path, {}) == change_records(table.audit_log())


@CURRENT_RELEASE_ONLY
def test_the_connector_reads_an_append_tables_changes_diffs_and_tags_as_we_do(paimon_spark, spark, warehouse):
    """An append table's history with a DELETE (an OVERWRITE) and tags on it: every range and tag pair
    in every mode. Its diff is the rows of the files only the end holds (nothing of files only the
    start holds); its changelog nothing; two tags read their diff."""
    path = f"{warehouse}/db.db/appended"
    FileStoreTable.create(path, CHANGES_SCHEMA, primary_keys=[], partition_keys=["dt"], options={"bucket": "-1"})

    def append(ids):
        write = FileStoreTable.open(path).new_write()
        write.write(pa.table({"id": ids, "v": [f"v{i}" for i in ids], "dt": ["a" if i % 2 else "b" for i in ids]}))
        write.commit()

    append([1, 2, 3])
    append([4, 5])
    delete(spark, path, "id = 3")  # rewrites a's file without it: snapshot 3, an OVERWRITE
    append([7])
    table = FileStoreTable.open(path)
    for i in range(1, 5):
        table.create_tag(f"t{i}", snapshot_id=i)
    compared = 0
    for first, second in (("1", "3"), ("2", "4"), ("0", "4"), ("3", "4"), ("t1", "t3"), ("t2", "t4"), ("t1", "t2")):
        for mode in MODES:
            if mode == "diff" and first == "0":
                continue  # a diff reads both ends' snapshots: 0 is none
            options = {"incremental-between": f"{first},{second}", "incremental-between-scan-mode": mode}
            ours = change_records(table.read_incremental(options))
            assert _theirs(paimon_spark, path, options) == ours, options
            compared += len(ours)
    assert compared > 0
