"""One rule for column names (issue 11, item 9): the adapter and the engine match a model's columns
and configs to the table's case-insensitively, as Spark and Paimon's catalogs do, so a model that
only changes the casing of its columns (or of its unique_key / partition_by / sequence_by) is the
same model; a name that matches nothing fails with one message."""

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.oracle import pypaimon_read

MODEL = """
{{ config(materialized='paimon_upsert', unique_key=var('key'), partition_by=var('part'),
          sequence_by=var('seq')) }}
{% if var('batch') == 1 %}
select cast(id as int) as id, 'a' as dt, cast(id as bigint) as updated, 'x' as payload from range(0, 4)
{% else %}
select cast(id as int) as ID, 'b' as DT, cast(id + 10 as bigint) as Updated, 'y' as PayLoad from range(2, 6)
{% endif %}
"""


class TestColumnCase:
    @pytest.fixture(scope="class")
    def models(self):
        return {"cased.sql": MODEL}

    def test_a_model_that_only_changes_casing_keeps_its_table(self, project):
        path = project.adapter.paimon_table_path(project.adapter.Relation.create(
            schema=project.test_schema, identifier="cased"))
        run_dbt(["run", "--vars", "{batch: 1, key: id, part: dt, seq: updated}"])
        _, log = run_dbt_and_capture(["run", "--vars", "{batch: 2, key: ID, part: DT, seq: UPDATED}"])
        assert "UPSERT 4: 2 inserted, 0 updated, 2 moved" in log
        rows = sorted((r["id"], r["dt"], r["updated"], r["payload"]) for r in pypaimon_read(path).to_pylist())
        assert rows == [(0, "a", 0, "x"), (1, "a", 1, "x"), (2, "b", 12, "y"), (3, "b", 13, "y"),
                        (4, "b", 14, "y"), (5, "b", 15, "y")]
        # the stored schema keeps its first spelling
        assert list(pypaimon_read(path).schema.names) == ["id", "dt", "updated", "payload"]

        _, log = run_dbt_and_capture(["run", "--vars", "{batch: 2, key: Idx, part: DT, seq: UPDATED}"],
                                     expect_pass=False)
        assert "unique_key column 'Idx' is not a column (columns: ID, DT, Updated, PayLoad)" in log
