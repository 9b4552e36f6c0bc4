"""dbt-tests-adapter's incremental suites with materialized='incremental', incremental_strategy='paimon_upsert':
every incremental model is a Paimon primary-key table kept by the engine.

The unique-key suite's fixtures hold two rows that no primary-key table can: a null city (part of a
three-column key) and two rows of state NY (a one-column key on state). Paimon's primary key is NOT
NULL and unique, so those rows get a city and a state of their own (CO/Denver/Denver, NV/Clark/Las
Vegas), the same in the seed and in the expected tables; every scenario then runs unchanged. A model
without unique_key, or with one that is not a column, is refused with a clear error on its first run
(there is no primary key to create the table with), which the keyless and bad-key tests assert.
"""

import pytest
from dbt.artifacts.schemas.results import RunStatus
from dbt.tests.adapter.incremental import test_incremental_unique_id as unique_id  # noqa: N813
from dbt.tests.adapter.incremental.test_incremental_on_schema_change import BaseIncrementalOnSchemaChange
from dbt.tests.adapter.incremental.test_incremental_unique_id import BaseIncrementalUniqueKey
from dbt.tests.util import run_dbt

PAIMON = {"models": {"+incremental_strategy": "paimon_upsert"}}


def _primary_key_safe(text: str) -> str:
    return (text.replace("CO,Denver,,2021-06-18", "CO,Denver,Denver,2021-06-18")
                .replace("NY,New York,Manhattan,2021-04-01", "NV,Clark,Las Vegas,2021-04-01")
                .replace("select 'CO','Denver',null,'2021-06-18'", "select 'CO','Denver','Denver','2021-06-18'")
                .replace("select 'NY','New York','Manhattan','2021-04-01'",
                         "select 'NV','Clark','Las Vegas','2021-04-01'"))


class TestIncrementalUniqueKeyPaimon(BaseIncrementalUniqueKey):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return PAIMON

    @pytest.fixture(scope="class")
    def seeds(self):
        return {
            "duplicate_insert.sql": unique_id.seeds__duplicate_insert_sql,
            "seed.csv": _primary_key_safe(unique_id.seeds__seed_csv),
            "add_new_rows.sql": unique_id.seeds__add_new_rows_sql,
        }

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "trinary_unique_key_list.sql": unique_id.models__trinary_unique_key_list_sql,
            "nontyped_trinary_unique_key_list.sql": unique_id.models__nontyped_trinary_unique_key_list_sql,
            "unary_unique_key_list.sql": unique_id.models__unary_unique_key_list_sql,
            "not_found_unique_key.sql": unique_id.models__not_found_unique_key_sql,
            "empty_unique_key_list.sql": unique_id.models__empty_unique_key_list_sql,
            "no_unique_key.sql": unique_id.models__no_unique_key_sql,
            "empty_str_unique_key.sql": unique_id.models__empty_str_unique_key_sql,
            "str_unique_key.sql": unique_id.models__str_unique_key_sql,
            "duplicated_unary_unique_key_list.sql": unique_id.models__duplicated_unary_unique_key_list_sql,
            "not_found_unique_key_list.sql": unique_id.models__not_found_unique_key_list_sql,
            "expected": {
                "one_str__overwrite.sql": _primary_key_safe(unique_id.models__expected__one_str__overwrite_sql),
                "unique_key_list__inplace_overwrite.sql": _primary_key_safe(
                    unique_id.models__expected__unique_key_list__inplace_overwrite_sql),
            },
        }

    def fail_to_build_inc_missing_unique_key_column(self, incremental_model_name):
        """A unique key that is not a column fails the first run already (it would be the primary key)."""
        run_dbt(["seed", "--select", "seed", "--full-refresh"])
        result = run_dbt(["run", "--select", incremental_model_name, "--full-refresh"], expect_pass=False).results[0]
        return result.status, result.message

    def _assert_needs_unique_key(self, model):
        run_dbt(["seed", "--select", "seed", "--full-refresh"])
        result = run_dbt(["run", "--select", model, "--full-refresh"], expect_pass=False).results[0]
        assert result.status == RunStatus.Error
        assert "needs unique_key" in result.message

    def test__empty_unique_key_list(self, project):
        self._assert_needs_unique_key("empty_unique_key_list")

    def test__no_unique_keys(self, project):
        self._assert_needs_unique_key("no_unique_key")

    def test__empty_str_unique_key(self, project):
        self._assert_needs_unique_key("empty_str_unique_key")


class TestIncrementalOnSchemaChangePaimon(BaseIncrementalOnSchemaChange):
    """ignore, fail, append_new_columns and sync_all_columns through Paimon schema evolution."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return PAIMON
