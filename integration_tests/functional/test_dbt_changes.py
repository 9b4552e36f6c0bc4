"""paimon_changes (issue 60): a downstream model reads only what changed upstream since its last run,
as a Paimon consumer of the upstream table; inserts, updates and deletes reach it; a failed run
consumes nothing; --full-refresh reads everything; expiration keeps what it has not read."""

import json
import os

import pytest
from dbt.tests.util import run_dbt

from dbt_paimon.store import FileStoreTable
from tests.oracle import pypaimon_read

ORDERS = """
{{ config(materialized='paimon_upsert', unique_key='id',
          options={'changelog-producer': 'lookup', 'rowkind.field': 'op'}) }}
{% set batches = {
    1: "(1, 'ann', 10, '+I'), (2, 'bob', 20, '+I'), (3, 'cid', 30, '+I')",
    2: "(2, 'bob', 21, '+I'), (3, 'cid', 30, '-D'), (4, 'dee', 40, '+I')",
    3: "(5, 'eve', 50, '+I'), (1, 'ann', 11, '+I')",
    4: "(6, 'fay', 60, '+I'), (5, 'eve', 50, '-D')",
} %}
select * from values {{ batches[var('batch')] }} as src(id, name, v, op)
"""
# `rowkind` is Paimon's reserved name: the downstream keeps the kind as `change`, its rowkind.field
ORDERS_COPY = """
{{ config(materialized='paimon_upsert', unique_key='id', options={'rowkind.field': 'change'}) }}
select rowkind as change, id, name, v from {{ paimon_changes(ref('orders')) }}
{% if var('fail', false) %} where raise_error('the downstream failed') is null {% endif %}
"""
IN_A_VIEW = """
{{ config(materialized='view') }}
select * from {{ paimon_changes(ref('orders')) }}
"""


class TestChangesAsInput:
    @pytest.fixture(scope="class")
    def models(self):
        return {"orders.sql": ORDERS, "orders_copy.sql": ORDERS_COPY}

    def _path(self, project, name):
        return os.path.join(project.adapter.config.credentials.warehouse, f"{project.test_schema}.db", name)

    def _consumer(self, project):
        folder = os.path.join(self._path(project, "orders"), "consumer")
        name = f"consumer-dbt-{project.test_schema}.orders_copy"
        with open(os.path.join(folder, name)) as f:
            return json.load(f)["nextSnapshot"]

    def _rows(self, project, name):
        rows = project.run_sql(f"select id, name, v from {project.test_schema}.{name} order by id", fetch="all")
        return [tuple(r) for r in rows]

    def _run(self, project, batch, *extra, expect_pass=True):
        return run_dbt(["run", "--vars", json.dumps({"batch": batch, **dict(extra)})], expect_pass=expect_pass)

    def test_inserts_updates_and_deletes_flow_downstream(self, project):
        self._run(project, 1)
        assert self._rows(project, "orders_copy") == self._rows(project, "orders") == [
            (1, "ann", 10), (2, "bob", 20), (3, "cid", 30)]
        latest = FileStoreTable.open(self._path(project, "orders")).snapshots.latest_id()
        assert self._consumer(project) == latest + 1  # the snapshot it reads next

        self._run(project, 2)  # an update, a delete, an insert: only those are read
        assert self._rows(project, "orders_copy") == self._rows(project, "orders") == [
            (1, "ann", 10), (2, "bob", 21), (4, "dee", 40)]
        # the changes read were the three changed keys, not the table: the copy's last commit wrote 3 records
        copy = pypaimon_read(self._path(project, "orders_copy")).to_pylist()
        assert sorted(r["id"] for r in copy) == [1, 2, 4]

        # a downstream run that fails consumes nothing: the next one reads the same changes
        before = self._consumer(project)
        results = self._run(project, 3, ("fail", True), expect_pass=False)
        failed = [r for r in results.results if r.node.name == "orders_copy"][0]
        assert "the downstream failed" in failed.message
        assert self._consumer(project) == before
        assert self._rows(project, "orders_copy") == [(1, "ann", 10), (2, "bob", 21), (4, "dee", 40)]
        run_dbt(["run", "-s", "orders_copy", "--vars", json.dumps({"batch": 3})])
        assert self._rows(project, "orders_copy") == self._rows(project, "orders") == [
            (1, "ann", 11), (2, "bob", 21), (4, "dee", 40), (5, "eve", 50)]
        assert self._consumer(project) > before

        # nothing changed upstream: nothing read, nothing changed downstream
        run_dbt(["run", "-s", "orders_copy", "--vars", json.dumps({"batch": 3})])
        assert self._rows(project, "orders_copy") == self._rows(project, "orders")

        # expiration keeps what the consumer has not read yet
        self._run(project, 4)
        run_dbt(["run", "-s", "orders", "--vars", json.dumps({"batch": 1})])  # a change the copy has not read
        pinned = self._consumer(project)
        run_dbt(["run-operation", "paimon_expire", "--args",
                 json.dumps({"relation": f"{project.test_schema}.orders", "retain_max": 1, "retain_min": 1})])
        with open(os.path.join(self._path(project, "orders"), "snapshot", "EARLIEST")) as f:
            assert int(f.read()) <= pinned
        run_dbt(["run", "-s", "orders_copy", "--vars", json.dumps({"batch": 4})])
        assert self._rows(project, "orders_copy") == self._rows(project, "orders")

        # --full-refresh reads everything again
        run_dbt(["run", "-s", "orders_copy", "--full-refresh", "--vars", json.dumps({"batch": 4})])
        assert self._rows(project, "orders_copy") == self._rows(project, "orders")

        # an upstream rolled back past what the copy read has no record of what it undid: refused
        orders = FileStoreTable.open(self._path(project, "orders"))
        back_to = orders.snapshots.latest_id() - 1
        run_dbt(["run-operation", "paimon_rollback", "--args",
                 json.dumps({"relation": f"{project.test_schema}.orders", "snapshot_id": back_to})])
        results = run_dbt(["run", "-s", "orders_copy", "--vars", json.dumps({"batch": 4})], expect_pass=False)
        assert "(rolled back since?); run" in results.results[0].message
        assert "with --full-refresh" in results.results[0].message

        # an upstream rebuilt (a full refresh makes a new table, without its consumers): every row
        # read as +I would keep the copy's rows of keys gone upstream (3 and 4 here): refused
        run_dbt(["run", "-s", "orders", "--full-refresh", "--vars", json.dumps({"batch": 1})])
        results = run_dbt(["run", "-s", "orders_copy", "--vars", json.dumps({"batch": 1})], expect_pass=False)
        assert "keeps no position for the consumer" in results.results[0].message
        assert "with --full-refresh" in results.results[0].message
        run_dbt(["run", "-s", "orders_copy", "--full-refresh", "--vars", json.dumps({"batch": 1})])
        assert self._rows(project, "orders_copy") == self._rows(project, "orders") == [
            (1, "ann", 10), (2, "bob", 20), (3, "cid", 30)]

    def test_a_model_that_keeps_no_table_is_refused(self, project):
        with open(os.path.join(project.project_root, "models", "in_a_view.sql"), "w") as f:
            f.write(IN_A_VIEW)
        try:
            results = run_dbt(["run", "-s", "in_a_view", "--vars", json.dumps({"batch": 1})], expect_pass=False)
            assert "a 'view' model cannot keep a consumer's position" in results.results[0].message
        finally:
            os.remove(os.path.join(project.project_root, "models", "in_a_view.sql"))
