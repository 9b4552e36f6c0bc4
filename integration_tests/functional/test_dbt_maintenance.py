"""Table maintenance through dbt (macros/maintenance.sql): run-operations that delete, compact,
expire, tag and roll back a paimon_upsert table; time travel and system tables as relations a model
or `dbt show` selects from. Real Spark, real files; pypaimon reads what every step leaves."""

import os
import re

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture
from dbt_common.exceptions import CompilationError, DbtBaseException, DbtRuntimeError

from dbt_paimon.adapter import maintenance
from dbt_paimon.store import FileStoreTable
from tests.oracle import pypaimon_read

# The seeds' walk-through: 1 row, then 9 rows in 9 partitions (the key 1 again, same partition).
CUSTOMERS_SQL = """
{{ config(materialized='paimon_upsert', unique_key='id', partition_by='dt') }}
{% if var('batch', 1) == 1 %}
select 1 as id, '20230501' as dt, 0 as v
{% else %}
select cast(id as int) as id, concat('2023050', cast(id as string)) as dt, cast(id * 10 as int) as v
from range(1, 10)
{% endif %}
"""

# Models over the maintenance reads, each a parquet table the test then reads with Spark SQL.
HISTORY_SQL = """
{{ config(materialized='table') }}
select snapshot_id, commit_kind, total_record_count from {{ paimon_system_table(ref('customers'), 'snapshots') }}
"""
FILES_SQL = """
{{ config(materialized='table') }}
select partition, bucket, file_path, level, record_count from {{ paimon_system_table(ref('customers'), 'files') }}
"""
AS_OF_SNAPSHOT_SQL = """
{{ config(materialized='table') }}
select * from {{ paimon_as_of(ref('customers'), snapshot_id=2) }}
"""
AS_OF_TAG_SQL = """
{{ config(materialized='table') }}
select * from {{ paimon_as_of(ref('customers'), tag='two') }}
"""
CURRENT_SQL = """
{{ config(materialized='table') }}
select * from {{ ref('customers') }}
"""

# Another macro using what an operation returns.
TAG_MACRO = """
{% macro tag_customers(tag) %}
  {% set result = paimon_create_tag(ref('customers'), tag, time_retained='7 d') %}
  {{ log('tagged snapshot ' ~ result['snapshot_id'] ~ ' of ' ~ result['relation'], info=True) }}
{% endmacro %}
"""

ROWS_OF_SNAPSHOT_2 = [(i, f"2023050{i}", i * 10) for i in range(1, 10)]
ROWS_LEFT = ROWS_OF_SNAPSHOT_2[:2]  # dt >= '20230503' deleted


def _data_files(path):
    return {os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if f.startswith("data-")}


def _partition_dirs(path):
    return sorted(d for d in os.listdir(path) if d.startswith("dt="))


def _live_files(path):
    return {f"{s.bucket_path}/{f.file_name}" for s in FileStoreTable.open(path).plan().splits for f in s.files}


def _oracle(path):
    return sorted((r["id"], r["dt"], r["v"]) for r in pypaimon_read(path).to_pylist())


def _ours(path):
    return sorted((r["id"], r["dt"], r["v"]) for r in FileStoreTable.open(path).to_arrow().to_pylist())


def _operation(name, args, expect_pass=True):
    _, log = run_dbt_and_capture(["run-operation", name, "--args", args], expect_pass=expect_pass)
    print(log)  # shown when the test fails
    return log


def _inline_error(sql):
    """The message of a `dbt show --inline` whose macros refuse their arguments while dbt parses it
    (dbt reports it and raises 'Error parsing inline query' from the CompilationError)."""
    with pytest.raises(DbtBaseException, match="Error parsing inline query") as failed:
        run_dbt(["show", "--inline", sql])
    assert isinstance(failed.value.__context__, CompilationError)
    return failed.value.__context__.msg


class TestMaintenanceThroughDbt:
    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": CUSTOMERS_SQL, "history.sql": HISTORY_SQL, "files.sql": FILES_SQL,
                "as_of_snapshot.sql": AS_OF_SNAPSHOT_SQL, "as_of_tag.sql": AS_OF_TAG_SQL, "current.sql": CURRENT_SQL}

    @pytest.fixture(scope="class")
    def macros(self):
        return {"tag_customers.sql": TAG_MACRO}

    def _table(self, project, name):
        rows = project.run_sql(f"select * from {project.test_schema}.{name}", fetch="all")
        return sorted(tuple(r) for r in rows)

    def test_walkthrough_time_travel_system_tables_and_refusals(self, project):
        schema = project.test_schema
        path = project.adapter.paimon_table_path(project.adapter.Relation.create(schema=schema, identifier="customers"))
        run_dbt(["run", "--select", "customers", "--vars", "batch: 1"])
        run_dbt(["run", "--select", "customers", "--vars", "batch: 2"])
        assert _oracle(path) == ROWS_OF_SNAPSHOT_2

        # a macro of the project tags through paimon_create_tag(ref(...)) and uses its result
        log = _operation("tag_customers", "{tag: two}")
        assert f"TAG {schema}.customers: tag 'two' on snapshot 2, retained for 7 d" in log
        assert f"tagged snapshot 2 of {schema}.customers" in log

        # DELETE: -D records in new files, one APPEND snapshot, no partition directory removed
        files, dirs = _data_files(path), _partition_dirs(path)
        log = _operation("paimon_delete", f"{{relation: {schema}.customers, where: \"dt >= '20230503'\"}}")
        assert f"DELETE 7 from {schema}.customers (snapshot 3)" in log
        assert files < _data_files(path) and _partition_dirs(path) == dirs
        assert _oracle(path) == ROWS_LEFT

        # full compaction: one COMPACT snapshot, one top-level file per live bucket
        log = _operation("paimon_compact", "{relation: customers}")
        assert f"COMPACT {schema}.customers: " in log and "(snapshot 4)" in log
        live = _live_files(path)
        assert len(live) == 2

        # the reads, as models: system tables, time travel by snapshot and by tag, ref() as is
        run_dbt(["run", "--select", "history", "files", "as_of_snapshot", "as_of_tag", "current"])
        # (total_record_count counts records in files: the old version of key 1, then 7 -D records)
        assert self._table(project, "history") == [(1, "APPEND", 1), (2, "APPEND", 10), (3, "APPEND", 17),
                                                   (4, "COMPACT", 2)]
        assert {r[2] for r in self._table(project, "files")} == live
        assert {(r[0], r[3], r[4]) for r in self._table(project, "files")} == {("{20230501}", 5, 1),
                                                                              ("{20230502}", 5, 1)}
        assert self._table(project, "as_of_snapshot") == ROWS_OF_SNAPSHOT_2
        assert self._table(project, "as_of_tag") == ROWS_OF_SNAPSHOT_2
        assert self._table(project, "current") == ROWS_LEFT

        # expiration keeps the latest snapshot only; every reader still reads it, the tag still works
        log = _operation("paimon_expire", "{relation: customers, retain_max: 1}")
        assert f"EXPIRE {schema}.customers: snapshot(s) 1-3 expired" in log and "snapshot 4 retained" in log
        table = FileStoreTable.open(path)
        assert (table.snapshots.earliest_id(), table.snapshots.latest_id()) == (4, 4)
        assert _ours(path) == _oracle(path) == ROWS_LEFT
        results = run_dbt(["run", "--select", "history", "as_of_tag", "current", "as_of_snapshot"],
                          expect_pass=False)
        status = {r.node.name: (r.status, r.message) for r in results.results}
        assert status["as_of_snapshot"][0] == "error"
        assert f"{schema}.customers has no snapshot 2 (the table at {path} has snapshots 4-4; tags: two)" in \
            status["as_of_snapshot"][1]
        assert {n: s for n, (s, _) in status.items() if n != "as_of_snapshot"} == {
            "history": "success", "as_of_tag": "success", "current": "success"}
        assert self._table(project, "history") == [(4, "COMPACT", 2)]
        assert self._table(project, "as_of_tag") == ROWS_OF_SNAPSHOT_2
        assert self._table(project, "current") == ROWS_LEFT

        # rollback to the tag: the 9 rows are back, for ref(), our reader and pypaimon
        log = _operation("paimon_rollback", f"{{relation: {schema}.customers, tag: two}}")
        assert f"ROLLBACK {schema}.customers to tag 'two' (snapshot 2): removed snapshot(s) 4" in log
        assert FileStoreTable.open(path).latest_snapshot().id == 2
        assert _ours(path) == _oracle(path) == ROWS_OF_SNAPSHOT_2

        # refusals: a clear message, and the table as it was
        files = _data_files(path)
        log = _operation("paimon_delete", "{relation: nope, where: 'id = 1'}", expect_pass=False)
        assert (f"paimon_delete: {schema}.nope is not a Paimon table: there is no Paimon table at "
                f"{os.path.join(os.path.dirname(path), 'nope')}") in log
        log = _operation("paimon_delete", "{relation: customers, where: 'no_such_column = 1'}", expect_pass=False)
        assert f"paimon_delete on {schema}.customers failed, nothing was deleted: delete predicate" in log
        assert "no_such_column" in log
        log = _operation("paimon_delete", "{relation: customers}", expect_pass=False)
        assert "paimon_delete: missing argument where. Usage: dbt run-operation paimon_delete" in log
        assert "paimon_as_of: give exactly one of snapshot_id and tag (both were given)" in _inline_error(
            "select * from {{ paimon_as_of(ref('customers'), snapshot_id=2, tag='two') }}")
        assert ("paimon_system_table: unknown system table table_indexes; the system tables are snapshots, "
                "files, buckets, partitions, tags, options, schemas, manifests, consumers, branches, audit_log, "
                "binlog, ro") in \
            _inline_error("select * from {{ paimon_system_table(ref('customers'), 'table_indexes') }}")
        assert _data_files(path) == files and FileStoreTable.open(path).latest_snapshot().id == 2

        # and dbt show reads ref() and the system tables in their current state
        shown = run_dbt(["show", "--inline", "select snapshot_id, commit_kind from "
                                             "{{ paimon_system_table(ref('customers'), 'snapshots') }}"])
        assert [tuple(r) for r in shown.results[0].agate_table.rows] == [(2, "APPEND")]
        shown = run_dbt(["show", "--limit", "20", "--inline",
                         "select id, dt, v from {{ ref('customers') }} order by id"])
        assert [tuple(r) for r in shown.results[0].agate_table.rows] == ROWS_OF_SNAPSHOT_2

        # what is left to do on this table: nothing to expire, and the tag goes
        log = _operation("paimon_expire", "{relation: customers, retain_max: 3, retain_min: 1, older_than: '1 h'}")
        assert f"EXPIRE {schema}.customers: nothing to expire; snapshot 2 retained" in log
        log = _operation("paimon_delete_tag", "{relation: customers, tag: two}")
        assert f"DELETE TAG {schema}.customers: tag 'two' deleted" in log
        assert FileStoreTable.open(path).list_tags() == []
        assert _ours(path) == _oracle(path) == ROWS_OF_SNAPSHOT_2

    def test_relation_forms_and_argument_checks(self, project):
        """How the operations read their arguments (no table is touched)."""
        adapter, schema = project.adapter, project.test_schema
        for given, expected in [("customers", (schema, "customers")), ("other.t", ("other", "t")),
                                ("`other`.`t`", ("other", "t")),
                                (adapter.Relation.create(schema="s", identifier="t"), ("s", "t")),
                                (adapter.Relation.create(identifier="t"), (schema, "t"))]:
            rel = maintenance.resolve(adapter.tables, given, "op")
            assert (rel.schema, rel.identifier) == expected
        for bad, message in [(None, "op: give the table as relation"), ("a.b.c", "is not 'schema.table' or 'table'"),
                             (42, "relation must be a ref(), 'schema.table' or 'table'")]:
            with pytest.raises(DbtRuntimeError, match=re.escape(message)):
                maintenance.resolve(adapter.tables, bad, "op")
        with pytest.raises(DbtRuntimeError, match="give exactly one of snapshot_id and tag"):
            maintenance.rollback(adapter.tables, "customers")
        with pytest.raises(DbtRuntimeError, match="retain_max must be at least 1, got 0"):
            maintenance.expire(adapter.tables, "customers", retain_max=0)
        with pytest.raises(DbtRuntimeError, match="snapshot_id must be an integer, got 'x'"):
            maintenance.as_of(adapter.tables, "customers", snapshot_id="x")
        with pytest.raises(DbtRuntimeError, match="must be a duration such as"):
            maintenance.expire(adapter.tables, "customers", older_than="soon")
        assert (maintenance.view_name(adapter.Relation.create(schema="s", identifier="t"), "tag_v1")
                == "paimon__s__t__tag_v1")
        assert maintenance._ids([1, 2, 3, 7, 9, 10]) == "1-3, 7, 9-10"
