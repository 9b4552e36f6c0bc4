"""Partition expiration and a batch write's tag (issue 40) as our writes apply them, read by Java
Paimon and pypaimon: `partition.expiration-time` drops the partitions older than it after the write
(an OVERWRITE commit, deletion vectors and dynamic-bucket indexes going with their files), and
`tag.automatic-creation` = batch tags the write's last snapshot `batch-write-<date>`."""

from __future__ import annotations

import datetime as dt

import pytest

from dbt_paimon.engine import RunSettings
from dbt_paimon.engine import upsert
from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.index.deletion_vectors import bucket_indexes
from tests.oracle import pypaimon_read, rows

from .javapaimon import Read

SPARK = "id bigint, dt string, v string"
TODAY = dt.date.today()


def _day(days_ago: int) -> str:
    return (TODAY - dt.timedelta(days=days_ago)).isoformat()


@pytest.mark.parametrize("options", [{"bucket": "2", "deletion-vectors.enabled": "true"}, {"bucket": "-1"}],
                         ids=["fixed-dv", "dynamic"])
def test_old_partitions_expire_and_the_batch_is_tagged(spark, java, warehouse, options):
    path = f"{warehouse}/db.db/expiring_{options['bucket'].replace('-', 'm')}"
    options = {**options, "partition.expiration-time": "7 d", "tag.automatic-creation": "batch"}
    first = [(1, _day(30), "a"), (2, _day(10), "a"), (3, _day(1), "a"), (4, _day(0), "a")]
    # the first write's partitions 30 and 10 days old expire right after it; the second rewrites one
    upsert(spark.createDataFrame(first, SPARK), path, primary_keys=["dt", "id"], partition_keys="dt",
           options=options, settings=RunSettings(execution="local"))
    upsert(spark.createDataFrame([(3, _day(1), "b"), (5, _day(20), "b")], SPARK), path, primary_keys=["dt", "id"],
           partition_keys="dt", options=options, settings=RunSettings(execution="local"))
    want = [{"id": 3, "dt": _day(1), "v": "b"}, {"id": 4, "dt": _day(0), "v": "a"}]
    table = FileStoreTable.open(path)
    kinds = [table.snapshots.snapshot(s).commit_kind for s in range(1, table.latest_snapshot().id + 1)]
    assert kinds.count("OVERWRITE") == 2  # one per write that found partitions to expire
    assert all(table.partition_bytes([_day(d)]) not in {p for p, _ in bucket_indexes(
        table.io, table.path, table.latest_snapshot())} for d in (30, 20, 10))
    tag = f"batch-write-{dt.datetime.fromtimestamp(table.latest_snapshot().time_millis / 1000):%Y-%m-%d}"
    assert table.tags.get(tag).snapshot_id == table.latest_snapshot().id
    java_read, java_tag = java.run([Read(path), Read(path, options={"scan.tag-name": tag})])
    for reader, got in (("java", java_read), ("java, the tag", java_tag), ("ours", table.to_arrow()),
                        ("pypaimon", pypaimon_read(path))):
        assert rows(got, ["id"]) == want, reader
