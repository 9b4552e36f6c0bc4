"""On the S3 test server, Paimon reads what we write: Java Paimon (the reference release, with its S3 file
system) reads a cross-partition table our engine keeps there, at the latest snapshot, at an earlier one
and by tag, as our reader, pypaimon and the model do. (Paimon's Spark connector does not run against the
test server: tests/paimon_spark/side_env.py.)"""

from __future__ import annotations

from dbt_paimon.engine import compact
from dbt_paimon.engine import upsert
from dbt_paimon.store.table import FileStoreTable
from tests.engine.helpers import frame
from tests.engine.model import UpsertModel, random_batches
from tests.oracle import pypaimon_read, rows

from .javapaimon import Read, assert_same


def test_paimon_reads_our_table_on_the_object_store(spark, java, s3_server, s3_warehouse):
    path = f"{s3_warehouse}/db.db/cross"
    model = UpsertModel(["id"], ["dt"])
    expected, moved = {}, 0
    for batch in random_batches(seed=17, batches=3, size=25, key_space=40):
        moved += model.apply(batch)["moved"]
        upsert(frame(spark, batch), path, primary_keys="id", partition_keys="dt",
               options={"dynamic-bucket.target-row-num": "5"})
        expected[FileStoreTable.open(path).latest_snapshot().id] = model.sorted_rows()
    assert moved > 0  # keys changed partition
    table = FileStoreTable.open(path)
    first, tagged = min(expected), max(expected)
    table.create_tag("before_compaction", snapshot_id=tagged)
    compact(spark, path)
    latest = FileStoreTable.open(path).latest_snapshot()
    assert latest.commit_kind == "COMPACT"

    store = s3_server.options  # Paimon's option names for the S3 server (endpoint, keys, path-style access)
    reads = {"latest": Read(path, catalog=store),
             "first": Read(path, {"scan.snapshot-id": str(first)}, catalog=store),
             "tag": Read(path, {"scan.tag-name": "before_compaction"}, catalog=store)}
    java_read = dict(zip(reads, java.run(list(reads.values()))))
    ours = {"latest": table.to_arrow(), "first": table.to_arrow(snapshot_id=first),
            "tag": table.to_arrow(tag="before_compaction")}
    want = {"latest": model.sorted_rows(), "first": expected[first], "tag": expected[tagged]}
    for name in reads:
        assert_same(java_read[name], ours[name], ["id"], want[name])
    assert rows(pypaimon_read(path), "id") == want["latest"]
