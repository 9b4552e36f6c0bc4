"""Contracts and constraints on Paimon tables (issue 13, item 4): with contract: {enforced: true}, a
primary_key constraint is the Paimon primary key (as unique_key; disagreeing is an error), not_null is
NOT NULL in the Paimon schema and enforced before the commit, other constraints are warned about; a
dbt-spark `table` model with not_null no longer fails on ALTER COLUMN."""

import pathlib

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from dbt_paimon.store import FileStoreTable
from tests.files import fingerprint
from tests.oracle import pypaimon_read

CONTRACT_YML = """
version: 2
models:
  - name: {name}
    config:
      contract: {{enforced: true}}
    columns:
      - name: id
        data_type: bigint
        constraints: [{{type: primary_key}}]
      - name: dt
        data_type: string
      - name: name
        data_type: string
        constraints: [{{type: not_null}}, {{type: check, expression: "length(name) > 0"}}]
"""

KEYED_SQL = """
{{{{ config(materialized='{materialized}', partition_by='dt'{extra}) }}}}
{{% set batches = {{1: "(1, 'a', 'ann'), (2, 'a', 'bob')", 2: "(2, 'b', 'bob'), (3, 'b', null)",
                     3: "(2, 'b', 'bob')"}} %}}
select cast(id as bigint) as id, dt, name from values {{{{ batches[var('batch')] }}}} as src(id, dt, name)
"""

PARQUET_SQL = """
{{ config(materialized='table') }}
select cast(1 as bigint) as id, 'a' as dt, 'ann' as name
"""


def _path(project, name):
    return f"{project.adapter.credentials.warehouse}/{project.test_schema}.db/{name}"


class TestContracts:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "upserted.sql": KEYED_SQL.format(materialized="paimon_upsert", extra=""),
            "upserted.yml": CONTRACT_YML.format(name="upserted"),
            "rebuilt.sql": KEYED_SQL.format(materialized="table", extra=", file_format='paimon'"),
            "rebuilt.yml": CONTRACT_YML.format(name="rebuilt"),
            "plain.sql": PARQUET_SQL,
            "plain.yml": CONTRACT_YML.format(name="plain"),
        }

    def test_constraints_become_the_paimon_schema_and_are_enforced(self, project):
        _, output = run_dbt_and_capture(["run", "--vars", "batch: 1"])
        assert "check constraint on name is not enforced" in output
        assert "are not enforced on a parquet table" in output  # plain: warned, not failed on ALTER COLUMN
        for name in ("upserted", "rebuilt"):
            schema = FileStoreTable.open(_path(project, name)).schema
            assert list(schema.primary_keys) == ["id"]
            assert schema.field("name").type.sql() == "STRING NOT NULL"
            assert sorted(r["id"] for r in pypaimon_read(_path(project, name)).to_pylist()) == [1, 2]
        # a null in a not_null column: refused before anything is written
        before = {name: fingerprint(_path(project, name)) for name in ("upserted", "rebuilt")}
        results, output = run_dbt_and_capture(["run", "--vars", "batch: 2", "--select", "upserted", "rebuilt"],
                                              expect_pass=False)
        assert "column 'name' is NOT NULL" in output
        assert fingerprint(_path(project, "upserted")) == before["upserted"]
        # the rebuilt table is built beside the old one and swapped in only when complete
        assert fingerprint(_path(project, "rebuilt")) == before["rebuilt"]
        run_dbt(["run", "--vars", "batch: 3", "--select", "upserted"])
        assert sorted((r["id"], r["dt"]) for r in pypaimon_read(_path(project, "upserted")).to_pylist()) == [
            (1, "a"), (2, "b")]


class TestPrimaryKeyDisagreeing:
    @pytest.fixture(scope="class")
    def models(self):
        return {"keyed.sql": KEYED_SQL.format(materialized="paimon_upsert", extra=", unique_key='dt'"),
                "keyed.yml": CONTRACT_YML.format(name="keyed")}

    def test_a_primary_key_constraint_must_agree_with_unique_key(self, project):
        _, output = run_dbt_and_capture(["run", "--vars", "batch: 1"], expect_pass=False)
        assert "the primary_key constraint ['id'] and unique_key ['dt'] disagree" in output
        assert not pathlib.Path(_path(project, "keyed")).exists()
