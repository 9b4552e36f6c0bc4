"""The pure-Python parts of sharing Spark's relations between dbt processes (no Spark): which
relation a statement writes or reads, and the relation locks."""

import re
import time

import pytest
from dbt_common.exceptions import DbtRuntimeError

from dbt_paimon.adapter import statements
from dbt_paimon.adapter.locks import HeldLocks, RelationLock, lock_path


@pytest.mark.parametrize("sql, relations, kind", [
    ('/* {"app": "dbt"} */\ncreate or replace view analytics.v as select 1', [("analytics", "v")], "view"),
    ("create table `My Schema`.`t` using parquet as select 1", [("my schema", "t")], "table"),
    ("create table spark_catalog.a.b (x int)", [("a", "b")], "table"),
    ("create table other_catalog.a.b (x int)", [], "table"),
    ("-- a comment\n  CREATE TABLE IF NOT EXISTS s.run_log (m string) using parquet", [("s", "run_log")], "table"),
    ("drop table if exists analytics.t", [("analytics", "t")], "drop"),
    ("drop view analytics.v", [("analytics", "v")], "drop"),
    ("alter table analytics.t rename to analytics.u", [("analytics", "t"), ("analytics", "u")], "rename"),
    ("alter table analytics.t set tblproperties ('a' = '1')", [("analytics", "t")], "alter"),
    ("insert overwrite table analytics.t select 1", [("analytics", "t")], "data"),
    ("insert into analytics.t values (1)", [("analytics", "t")], "data"),
    ("create or replace temporary view t__dbt_tmp as select 1", [], None),
    ("select * from analytics.t", [], None),
])
def test_what_a_statement_writes(sql, relations, kind):
    statement = statements.parse(sql)
    assert statement.relations == relations
    assert statement.kind == kind


def test_schemas_listings_and_statements_not_read_here():
    assert statements.parse("create schema if not exists analytics").schema_change == ("create", "analytics")
    assert statements.parse("drop schema if exists `Analytics` cascade").schema_change == ("drop", "analytics")
    assert statements.parse("show table extended in analytics like '*'").listed_schema == "analytics"
    # a one-part name is in the current schema, which is asked for only then
    asked = []
    assert statements.parse("drop view v", lambda: asked.append(1) or "cur").relations == [("cur", "v")]
    assert asked == [1] and statements.parse("drop view v").bare_names == ["v"]
    assert statements.parse("create function f as 'x.Y'").unknown is False
    assert statements.parse("with x as (select 1) insert into a.t select * from x").unknown is False
    assert statements.is_metadata("describe table extended a.t") and not statements.is_metadata("select 1")
    assert statements.qualified_names("select * from a.t join `b`.`c d` on a.t.x = 1") >= {("a", "t"), ("b", "c d")}


def test_a_lock_is_exclusive_for_writers_and_shared_between_readers(tmp_path):
    path = lock_path(str(tmp_path), "analytics", "customers")
    writer = RelationLock(path, "analytics.customers")
    writer.acquire(True, 0, print)
    waits = []
    with pytest.raises(DbtRuntimeError) as refused:
        RelationLock(path, "analytics.customers").acquire(False, 0.3, waits.append)
    assert re.fullmatch(r"analytics\.customers is being written by another dbt process, pid \d+ on \S+ \(.+, since "
                        r"\d\d:\d\d:\d\d\); gave up after 0\.3 s \(the profile's lock_timeout\): run again when that "
                        r"process is done", refused.value.msg), refused.value.msg
    assert len(waits) == 1 and "waiting for it (up to 0.3 s" in waits[0]
    writer.release()

    readers = [RelationLock(path, "analytics.customers") for _ in range(2)]
    for r in readers:
        r.acquire(False, 0, print)  # two readers at once
    with pytest.raises(DbtRuntimeError, match="is being read by another dbt process; gave up"):
        RelationLock(path, "analytics.customers").acquire(True, 0, print)
    for r in readers:
        r.release()
    RelationLock(path, "analytics.customers").acquire(True, 0, print)


def test_a_connection_keeps_its_locks_until_released_and_upgrades_without_deadlock(tmp_path):
    path = lock_path(str(tmp_path), "s", "t")
    held, other = HeldLocks(), HeldLocks()
    held.acquire(path, "s.t", False, 0, print)
    held.acquire(path, "s.t", False, 0, print)  # again: nothing to do
    other.acquire(path, "s.t", False, 0, print)
    # both read, both come to write: the first to ask waits while it holds nothing, so the other one
    # (whose own upgrade then fails at once here) never waits for it in turn
    with pytest.raises(DbtRuntimeError, match="being read"):
        held.acquire(path, "s.t", True, 0.2, print)
    other.acquire(path, "s.t", True, 0, print)
    other.release_all()
    started = time.monotonic()
    held.acquire(path, "s.t", True, 1, print)
    assert time.monotonic() - started < 1
    with pytest.raises(DbtRuntimeError, match="being written"):
        other.acquire(path, "s.t", False, 0, print)
    held.release_all()
    other.acquire(path, "s.t", False, 0, print)
