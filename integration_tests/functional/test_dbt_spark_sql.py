"""Spark SQL on a Paimon model from inside dbt (a post-hook, `run-operation`, `dbt show`'s session): ALTER
TABLE, INSERT and DELETE change the Paimon table itself, and the next `dbt run` continues it."""

import os

import pytest
from dbt.tests.util import run_dbt

from dbt_paimon.store import FileStoreTable
from tests.oracle import pypaimon_read

MODEL = """
{{ config(materialized='incremental', file_format='paimon', unique_key='id', partition_by='dt',
          on_schema_change='append_new_columns',
          post_hook="ALTER TABLE {{ this }} SET TBLPROPERTIES ('snapshot.num-retained.min' = '4')") }}
{% if var('run', 1) == 1 %}
select 1 as id, 'a' as dt, 10 as v union all select 2, 'a', 20 union all select 3, 'b', 30
{% else %}
select 2 as id, 'a' as dt, 21 as v
{% endif %}
"""

MACROS = """
{% macro by_hand() %}
  {% do run_query("ALTER TABLE " ~ ref('keyed') ~ " ADD COLUMNS (note string COMMENT 'typed by hand')") %}
  {% do run_query("INSERT INTO " ~ ref('keyed') ~ " (id, dt, v, note) VALUES (4, 'b', 40, 'hand')") %}
  {% do run_query("DELETE FROM " ~ ref('keyed') ~ " WHERE id = 1") %}
{% endmacro %}
"""


class TestSparkSqlOnPaimonModels:
    @pytest.fixture(scope="class")
    def models(self):
        return {"keyed.sql": MODEL}

    @pytest.fixture(scope="class")
    def macros(self):
        return {"by_hand.sql": MACROS}

    def test_statements_change_the_table_and_dbt_continues_it(self, project):
        run_dbt(["run"])
        warehouse = project.adapter.config.credentials.warehouse
        path = os.path.join(warehouse, f"{project.test_schema}.db", "keyed")
        assert FileStoreTable.open(path).schema.options["snapshot.num-retained.min"] == "4"  # the post-hook
        run_dbt(["run-operation", "by_hand"])
        table = FileStoreTable.open(path)
        assert table.schema.field_names == ["id", "dt", "v", "note"]
        assert table.schema.field("note").description == "typed by hand"
        rows = sorted(tuple(r) for r in project.run_sql(
            f"select id, dt, v, note from {project.test_schema}.keyed", fetch="all"))
        assert rows == [(2, "a", 20, None), (3, "b", 30, None), (4, "b", 40, "hand")]
        run_dbt(["run", "--vars", "{run: 2}"])  # the model lacks `note`: its rows get null there
        rows = sorted(tuple(r) for r in project.run_sql(
            f"select id, dt, v, note from {project.test_schema}.keyed", fetch="all"))
        assert rows == [(2, "a", 21, None), (3, "b", 30, None), (4, "b", 40, "hand")]
        assert sorted((r["id"], r["v"], r["note"]) for r in pypaimon_read(path).to_pylist()) == \
            [(2, 21, None), (3, 30, None), (4, 40, "hand")]
