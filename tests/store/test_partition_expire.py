"""Partition expiration (partition_expire.py) and a batch write's tag (tag_creation.py), as Paimon's
PartitionExpire and TagBatchCreation do them."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from dbt_paimon.store import FileStoreTable, SchemaError
from dbt_paimon.store.maintenance.partition_expire import expire_partitions, expired_partitions, partition_time
from dbt_paimon.store.schema.schema import build_schema
from dbt_paimon.store.snapshot.tag_creation import create_batch_tag, create_process_time_tags, process_time_tags

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("hr", pa.string()), ("v", pa.string())])
NOW = dt.datetime(2026, 11, 28, 12, 0)


@pytest.mark.parametrize("options, values, want", [
    ({}, {"dt": "2026-11-20", "hr": "7"}, dt.datetime(2026, 11, 20)),
    ({}, {"dt": "2026-11-20 07:30:00", "hr": "7"}, dt.datetime(2026, 11, 20, 7, 30)),
    ({"partition.timestamp-pattern": "$dt $hr:00:00"}, {"dt": "2026-11-20", "hr": "7"}, dt.datetime(2026, 11, 20, 7)),
    ({"partition.timestamp-formatter": "yyyyMMdd"}, {"dt": "20261120", "hr": "7"}, dt.datetime(2026, 11, 20)),
    ({}, {"dt": "yesterday", "hr": "7"}, None),  # not a time: left alone
    ({}, {"dt": None, "hr": "7"}, None),
])
def test_a_partitions_time_is_what_its_values_say(options, values, want):
    schema = build_schema(SCHEMA, ["id", "dt", "hr"], ["dt", "hr"], options)
    assert partition_time(values, schema) == want


def _table(path: str, options: dict) -> FileStoreTable:
    table = FileStoreTable.create(path, SCHEMA, ["id", "dt", "hr"], ["dt", "hr"],
                                  options={"bucket": "1", "partition.expiration-time": "7 d", **options})
    w = table.new_write()
    w.write(pa.table({"id": [1, 2, 3, 4], "dt": ["2026-11-01", "2026-11-10", "2026-11-25", "2026-11-01"],
                      "hr": ["1", "1", "1", "2"], "v": ["a"] * 4}, schema=SCHEMA))
    table.new_commit().commit(w.prepare_commit())
    return table


def test_expired_partitions_go_in_one_overwrite_commit(tmp_path):
    table = _table(str(tmp_path / "t"), {"partition.expiration-max-num": "2"})
    [sid] = expire_partitions(table, NOW)
    snapshot = table.snapshots.snapshot(sid)
    assert snapshot.commit_kind == "OVERWRITE"
    # three partitions are older than 7 days; max-num 2 takes the first two in the order of their values
    assert sorted(r["id"] for r in table.to_arrow().to_pylist()) == [2, 3]
    assert expire_partitions(table, NOW)  # the third
    assert sorted(r["id"] for r in table.to_arrow().to_pylist()) == [3]


def test_update_time_and_batch_size_and_what_expires_nothing(tmp_path):
    table = _table(str(tmp_path / "t"), {"partition.expiration-strategy": "update-time",
                                         "partition.expiration-batch-size": "1"})
    assert expired_partitions(table, NOW) == []  # every file was written just now
    assert len(expire_partitions(table, dt.datetime.now() + dt.timedelta(days=8))) == 4  # one commit each
    assert table.to_arrow().num_rows == 0
    unpartitioned = FileStoreTable.create(str(tmp_path / "u"), SCHEMA, ["id"],
                                          options={"bucket": "1", "partition.expiration-time": "1 d"})
    assert expired_partitions(unpartitioned, NOW) == []


@pytest.mark.parametrize("options, message", [
    ({"partition.timestamp-pattern": "$day"}, r"names \['day'\], which are not partition fields"),
    ({"partition.timestamp-formatter": "yyyy-MM-dd'T'HH"}, "reads the letters"),
    ({"partition.expiration-strategy": "sometimes"}, "must be one of values-time, update-time"),
    ({"tag.automatic-creation": "watermark"}, "watermark tags need the watermarks"),
    ({"tag.creation-delay": "1 d"}, "shorter than one tag.creation-period"),
])
def test_refused_options_name_the_problem(tmp_path, options, message):
    with pytest.raises(SchemaError, match=message):
        FileStoreTable.create(str(tmp_path / "t"), SCHEMA, ["id", "dt", "hr"], ["dt", "hr"], options=options)


def test_a_batch_tag_holds_the_days_last_write_and_old_tags_go(tmp_path):
    table = _table(str(tmp_path / "t"), {"tag.automatic-creation": "batch", "tag.num-retained-max": "2",
                                         "partition.expiration-time": "3650 d"})
    table.create_tag("manual-0", 1)
    name = create_batch_tag(table)
    assert name == "batch-write-" + dt.datetime.fromtimestamp(table.latest_snapshot().time_millis / 1000).strftime(
        "%Y-%m-%d")
    w = table.new_write()
    w.write(pa.table({"id": [9], "dt": ["2026-11-25"], "hr": ["1"], "v": ["b"]}, schema=SCHEMA))
    table.new_commit().commit(w.prepare_commit())
    assert create_batch_tag(table) == name
    assert table.tags.get(name).snapshot_id == 2  # moved to the day's last batch
    assert sorted(t.name for t in table.list_tags()) == sorted([name, "manual-0"])
    table.alter_options({"tag.batch.customized-name": "nightly"})
    assert create_batch_tag(table) == "nightly"
    assert sorted(t.name for t in table.list_tags()) == sorted([name, "nightly"])  # retained: the newest 2


def _at(sid: int, when: str):
    class S:  # a snapshot's id and commit time
        id, time_millis = sid, dt.datetime.fromisoformat(when).timestamp() * 1000
    return S


def test_process_time_tags_name_the_period_before_the_snapshot_that_follows_it():
    day = dt.timedelta(days=1)
    snaps = [_at(1, "2026-11-27 05:00"), _at(2, "2026-11-27 23:00"), _at(3, "2026-11-28 00:30"),
             _at(4, "2026-11-30 09:00")]
    # the first snapshot gets the day before; each later day the first snapshot after it ended
    assert process_time_tags(snaps, {}, day, "%Y-%m-%d") == [("2026-11-26", 1), ("2026-11-27", 3),
                                                                ("2026-11-29", 4)]
    assert process_time_tags(snaps[2:], {"2026-11-26": 1}, day, "%Y-%m-%d") == [("2026-11-27", 3),
                                                                                  ("2026-11-29", 4)]
    assert process_time_tags(snaps[2:], {}, day, "%Y-%m-%d", delay=dt.timedelta(hours=1))[0] == ("2026-11-27", 3)
    hourly = process_time_tags(snaps[:2], {}, dt.timedelta(hours=1), "%Y-%m-%d %H")
    assert hourly == [("2026-11-27 04", 1), ("2026-11-27 22", 2)]


def test_a_table_with_process_time_tags_gets_them_after_its_commits(tmp_path):
    table = _table(str(tmp_path / "t"), {"tag.automatic-creation": "process-time",
                                         "partition.expiration-time": "3650 d"})
    made = create_process_time_tags(table)
    when = dt.datetime.fromtimestamp(table.snapshots.snapshot(1).time_millis / 1000)
    assert made == [(when - dt.timedelta(days=1)).strftime("%Y-%m-%d")]
    assert table.tags.get(made[0]).snapshot_id == 1
    assert create_process_time_tags(table) == []  # nothing new until the day is over
