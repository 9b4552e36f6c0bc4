"""No half-done operations (issue 11, item 2): an operation reported as failed changed nothing, and
one that changed the table is reported as done. Maintenance operations check every argument and
their target before they write; a paimon_upsert model settles what it cannot honour (grants) before
its commit, as a warning, never as an error after it."""

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from dbt_paimon.store import FileStoreTable
from tests.files import fingerprint
from tests.oracle import pypaimon_read

CUSTOMERS = """
{{ config(materialized='paimon_upsert', unique_key='id', partition_by='dt',
          grants={'select': ['analysts']}) }}
select cast(id as int) as id, concat('d', cast(id % 3 as string)) as dt, cast(id * {{ var('batch', 1) }} as int) as v
from range(0, 6)
"""
PLAIN_TABLE = """
{{ config(materialized='table', grants={'select': ['analysts']}) }}
select 1 as id
"""


class TestNothingHalfDone:
    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": CUSTOMERS, "plain.sql": PLAIN_TABLE}

    def test_grants_are_warned_about_before_the_commit(self, project):
        _, log = run_dbt_and_capture(["run"])
        warned = log.index("grants {'select': ['analysts']} are not applied")
        assert warned < log.index("UPSERT 6: 6 inserted")  # decided before the upsert ran
        assert "a Paimon warehouse on a filesystem" in log
        assert log.count("are not applied") == 2  # the plain `table` model warns too, and succeeds

    @pytest.mark.parametrize("operation,args,error", [
        ("paimon_expire", "retain_max: 1, retain_min: 3", "must not be less than retainMin"),
        ("paimon_expire", "retain_max: 0", "retain_max must be at least 1"),
        ("paimon_expire", "older_than: soon", "older_than"),
        ("paimon_expire", "max_deletes: many", "max_deletes must be an integer"),
        ("paimon_create_tag", "tag: '../x'", "must be a plain file name"),
        ("paimon_create_tag", "tag: v9, snapshot_id: 99", "snapshot #99 doesn't exist"),
        ("paimon_create_tag", "tag: v9, snapshot_id: two", "snapshot_id must be an integer"),
        ("paimon_rollback", "snapshot_id: 99", "Rollback snapshot '99' doesn't exist"),
        ("paimon_rollback", "tag: nope", "Tag 'nope' doesn't exist"),
        ("paimon_rollback", "snapshot_id: 1, tag: t", "give exactly one of snapshot_id and tag"),
        ("paimon_delete", "where: 'no_such_column = 1'", "no_such_column"),
        ("paimon_delete", "where: 'id ='", "nothing was deleted"),
        ("paimon_remove_orphan_files", "older_than: yesterday", "older_than"),
        ("paimon_remove_orphan_files", "dry_run: perhaps", "dry_run must be true or false"),
    ])
    def test_a_refused_operation_changes_nothing(self, project, operation, args, error):
        path = project.adapter.paimon_table_path(project.adapter.Relation.create(
            schema=project.test_schema, identifier="customers"))
        if not FileStoreTable.exists(path):
            run_dbt(["run", "--select", "customers"])
            run_dbt(["run", "--select", "customers", "--vars", "batch: 2"])
        before = fingerprint(path)
        rows = sorted(tuple(r.values()) for r in pypaimon_read(path).to_pylist())
        try:
            _, log = run_dbt_and_capture(["run-operation", operation, "--args",
                                          f"{{relation: {project.test_schema}.customers, {args}}}"], expect_pass=False)
        except Exception as e:  # noqa: BLE001 - argument errors raised while dbt parses the call
            log = str(e)
        assert error in log, log
        assert fingerprint(path) == before
        assert sorted(tuple(r.values()) for r in pypaimon_read(path).to_pylist()) == rows

    def test_a_committed_operation_is_reported_done_even_if_the_catalog_refresh_fails(self, project):
        """The compaction commits; refreshing Spark's catalog entry then fails (a view took the
        table's name): that is a warning, and the operation is reported done."""
        schema = project.test_schema
        path = project.adapter.paimon_table_path(project.adapter.Relation.create(schema=schema, identifier="customers"))
        if not FileStoreTable.exists(path):
            run_dbt(["run", "--select", "customers"])
        run_dbt(["run", "--select", "customers", "--vars", "batch: 3"])
        before = FileStoreTable.open(path).latest_snapshot().id
        project.run_sql(f"drop table if exists {schema}.customers")
        project.run_sql(f"create view {schema}.customers as select 1 as id")
        try:
            _, log = run_dbt_and_capture(["run-operation", "paimon_compact", "--args",
                                          f"{{relation: {schema}.customers}}"])
        finally:
            project.run_sql(f"drop view if exists {schema}.customers")
        assert f"COMPACT {schema}.customers:" in log
        assert "the change was committed, but Spark's catalog entry could not be refreshed" in log
        assert FileStoreTable.open(path).latest_snapshot().id == before + 1
        assert FileStoreTable.open(path).latest_snapshot().commit_kind == "COMPACT"
