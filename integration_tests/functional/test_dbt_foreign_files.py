"""A foreign file does not stop dbt (issue 11, item 5): stray files, directories that are no Paimon
table, damaged metadata and dangling links in `<warehouse>/<db>.db/` are skipped with a warning when
a dbt process syncs Spark's catalog with the warehouse; every other table stays usable."""

import os

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from dbt_paimon.adapter import session
from dbt_paimon.store import FileStoreTable
from tests.oracle import pypaimon_read

GOOD = "{{ config(materialized='paimon_upsert', unique_key='id') }} select 1 as id, 'kept' as v"
READER = "{{ config(materialized='table') }} select * from {{ ref('good') }}"


class TestForeignEntriesAreSkipped:
    @pytest.fixture(scope="class")
    def models(self):
        return {"good.sql": GOOD, "reader.sql": READER}

    def test_dbt_keeps_working_beside_foreign_entries(self, project):
        run_dbt(["run", "--select", "good"])
        warehouse = project.adapter.credentials.warehouse
        db = os.path.join(warehouse, f"{project.test_schema}.db")
        with open(os.path.join(db, "notes.txt"), "w") as f:
            f.write("not a table")
        os.makedirs(os.path.join(db, "empty_dir"))
        os.makedirs(os.path.join(db, "garbage", "schema"))
        with open(os.path.join(db, "garbage", "schema", "schema-0"), "w") as f:
            f.write("{ this is not json")
        os.makedirs(os.path.join(db, "dir_schema", "schema", "schema-0"))  # a directory where a file belongs
        os.makedirs(os.path.join(db, "bad$name", "schema"))
        os.symlink(os.path.join(db, "nowhere"), os.path.join(db, "dangling"))
        with open(os.path.join(warehouse, "stray.db"), "w") as f:  # a file named like a database
            f.write("x")
        os.symlink("loop.db", os.path.join(warehouse, "loop.db"))  # a link to itself
        # (an unreadable directory cannot be made for root, who runs CI here: the damaged entries
        # above raise the same OSErrors and parse errors a read would)

        session._ready.clear()  # the next connection syncs the catalog again, as a new dbt process does
        _, log = run_dbt_and_capture(["run", "--select", "reader"])
        for entry in ("notes.txt", "empty_dir", "garbage", "dir_schema", "bad$name"):
            assert f"skipping {os.path.join(db, entry)}" in log, entry
        assert project.run_sql(f"select id, v from {project.test_schema}.reader", fetch="all") == [(1, "kept")]
        run_dbt(["run", "--select", "good"])  # a later upsert of the good table
        path = project.adapter.paimon_table_path(project.adapter.Relation.create(
            schema=project.test_schema, identifier="good"))
        assert FileStoreTable.open(path).latest_snapshot().id == 2
        assert pypaimon_read(path).to_pylist() == [{"id": 1, "v": "kept"}]
        run_dbt(["docs", "generate"])
        for entry in ("notes.txt", "empty_dir", "garbage", "dir_schema", "bad$name", "dangling"):
            assert os.path.lexists(os.path.join(db, entry))  # skipped, never touched
