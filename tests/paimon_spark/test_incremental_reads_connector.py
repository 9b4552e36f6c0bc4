"""Paimon's Spark connector reads our tables' changes as we do: `incremental-between` (every range of a
random history with deletes, in the scan modes auto, delta, changelog and diff) and the `audit_log` system
table, on a key table without a changelog producer and with `input`, partitioned, written by the
store. Its rows through `t$audit_log` with `spark.paimon.incremental-between` (the connector's way to
show row kinds) are the records of our `read_between`, kinds and values; its `t$audit_log` is our
`audit_log()`. (Java Paimon's records of the same reads: tests/java_paimon/test_incremental_reads.py.)

Paimon 2.0's connector: 0.9's does not apply `incremental-between` to `$audit_log` (its rows there
differ from the range's records), so a range's row kinds need the current release.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from dbt_paimon.store import FileStoreTable

from .side_env import table_name

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("dt", pa.string())])
MODES = ("auto", "delta", "changelog", "diff")


def _records(table: pa.Table) -> list[tuple]:
    return sorted(zip(*(table.column(c).to_pylist() for c in ("rowkind", "id", "v"))))


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


@pytest.mark.parametrize("producer", ["none", "input"])
@pytest.mark.parametrize("paimon_spark", ["2.0"], indirect=True, ids=lambda line: f"paimon-spark-{line}")
def test_the_connector_reads_our_changes_as_we_do(paimon_spark, warehouse, producer):
    rnd = random.Random(f"connector-{producer}")
    path = f"{warehouse}/db.db/changes_{producer}"
    FileStoreTable.create(path, SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                          options={"bucket": "2", "changelog-producer": producer})
    for s in range(5):
        ids = rnd.sample(range(20), 6)
        write = FileStoreTable.open(path).new_write()
        write.write(pa.table({"id": ids, "v": [f"v{s}-{i}" for i in ids], "dt": [f"d{i % 2}" for i in ids]}),
                    row_kinds=[rnd.choice([0, 2, 3]) for _ in ids])  # +I, +U, -D
        write.commit()
    table = FileStoreTable.open(path)
    latest = table.snapshots.latest_id()
    compared = 0
    for start, end in ((0, latest), (1, latest), (latest - 1, latest), (1, 2), (2, latest - 1)):
        for mode in MODES:
            if mode == "changelog" and producer == "none":
                continue  # no changelog files: Paimon reads nothing, we refuse (test_incremental_reads)
            if mode == "diff" and start == 0:
                continue  # a diff reads both ends' snapshots: 0 is none
            ours = _records(table.read_between(start, end, mode))
            theirs = _theirs(paimon_spark, path, {"incremental-between": f"{start},{end}",
                                                  "incremental-between-scan-mode": mode})
            assert theirs == ours, (start, end, mode)
            compared += len(ours)
    assert compared > 0
    assert _theirs(paimon_spark, path, {}) == _records(table.audit_log())
