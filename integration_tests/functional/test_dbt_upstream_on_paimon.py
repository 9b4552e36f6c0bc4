"""dbt-core's own adapter test classes (dbt-tests-adapter) run with `+file_format: paimon` on every model,
seed and snapshot of their projects, as a dbt-databricks user writes `+file_format: delta` once: every table
they build is a Paimon table (a model without unique_key an append table)."""

from __future__ import annotations

import copy
import inspect

import pytest
from dbt.tests.adapter.basic.test_adapter_methods import BaseAdapterMethod
from dbt.tests.adapter.basic.test_base import BaseSimpleMaterializations
from dbt.tests.adapter.basic.test_empty import BaseEmpty
from dbt.tests.adapter.basic.test_ephemeral import BaseEphemeral
from dbt.tests.adapter.basic.test_generic_tests import BaseGenericTests
from dbt.tests.adapter.basic.test_incremental import BaseIncremental, BaseIncrementalNotSchemaChange
from dbt.tests.adapter.basic.test_singular_tests import BaseSingularTests
from dbt.tests.adapter.basic.test_singular_tests_ephemeral import BaseSingularTestsEphemeral
from dbt.tests.adapter.basic.test_table_materialization import BaseTableMaterialization
from dbt.tests.adapter.basic.test_validate_connection import BaseValidateConnection
from dbt.tests.adapter.constraints.test_constraints import BaseIncrementalForeignKeyConstraint
from dbt.tests.adapter.dbt_clone.test_dbt_clone import (BaseCloneNotPossible, BaseClonePossible,
                                                        BaseCloneSameTargetAndState)
from dbt.tests.adapter.incremental.test_incremental_merge_exclude_columns import BaseMergeExcludeColumns
from dbt.tests.adapter.incremental.test_incremental_microbatch import BaseMicrobatch
from dbt.tests.adapter.incremental.test_incremental_on_schema_change import BaseIncrementalOnSchemaChange
from dbt.tests.adapter.persist_docs.test_persist_docs import (
    BasePersistDocsAllColumnsMissing, BasePersistDocsColumnMissing, BasePersistDocsCommentOnQuotedColumn,
    BasePersistDocsQuotedColumnCaseSensitive, BasePersistDocsQuotedDescriptionNotAppliedOnMismatch)
from dbt.tests.adapter.relations.test_changing_relation_type import BaseChangeRelationTypeValidator
from dbt.tests.adapter.relations.test_dropping_schema_named import BaseDropSchemaNamed
from dbt.tests.adapter.store_test_failures_tests.test_store_test_failures import (
    BaseStoreTestFailures, BaseStoreTestFailuresLimit)
from dbt.tests.adapter.unit_testing.test_case_insensitivity import BaseUnitTestCaseInsensivity
from dbt.tests.adapter.unit_testing.test_invalid_input import BaseUnitTestInvalidInput
from dbt.tests.adapter.unit_testing.test_types import BaseUnitTestingVarcharFixtureNoTruncation

PAIMON_EVERYWHERE = {"models": {"+file_format": "paimon"}, "seeds": {"+file_format": "paimon"},
                     "snapshots": {"+file_format": "paimon"}}


def _merged(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def on_paimon(upstream: type) -> type:
    """`upstream` with PAIMON_EVERYWHERE merged into its project config."""
    inherited = None
    for base in upstream.__mro__:
        if "project_config_update" in base.__dict__:
            inherited = base.__dict__["project_config_update"]
            break

    @pytest.fixture(scope="class")
    def project_config_update(self, request):
        if inherited is None:
            own = {}
        elif isinstance(inherited, property):  # some classes give it as a property
            own = inherited.fget(self)
        else:  # a fixture, which may itself take fixtures (unique_schema, ...)
            function = inherited._get_wrapped_function()
            wanted = list(inspect.signature(function).parameters)[1:]
            own = function(self, **{name: request.getfixturevalue(name) for name in wanted})
        return _merged(own or {}, PAIMON_EVERYWHERE)

    return type(f"{upstream.__name__}OnPaimon", (upstream,), {"project_config_update": project_config_update,
                                                             "__module__": __name__})


# ---- the classes, each run with every table a Paimon table ----------------------------------------------
# Every class of the suites below that passes on dbt-spark's parquet passes here too, and five more
# (clone, persist_docs, on_schema_change). The others fail on parquet as on Paimon, for reasons of
# the upstream fixtures (SQL for other engines: TEXT columns, `None` as a database, UPDATE/DELETE on
# seeds, delete+insert) or of dbt-spark (constraints DDL, catalog of one relation).


TestSimpleMaterializations = on_paimon(BaseSimpleMaterializations)
TestEmpty = on_paimon(BaseEmpty)
TestEphemeral = on_paimon(BaseEphemeral)
TestGenericTests = on_paimon(BaseGenericTests)
TestSingularTests = on_paimon(BaseSingularTests)
TestSingularTestsEphemeral = on_paimon(BaseSingularTestsEphemeral)
TestAdapterMethod = on_paimon(BaseAdapterMethod)
TestValidateConnection = on_paimon(BaseValidateConnection)
TestTableMaterialization = on_paimon(BaseTableMaterialization)
TestIncremental = on_paimon(BaseIncremental)
TestIncrementalNotSchemaChange = on_paimon(BaseIncrementalNotSchemaChange)
TestIncrementalOnSchemaChange = on_paimon(BaseIncrementalOnSchemaChange)
TestMergeExcludeColumns = on_paimon(BaseMergeExcludeColumns)
TestIncrementalForeignKeyConstraint = on_paimon(BaseIncrementalForeignKeyConstraint)
TestCloneNotPossible = on_paimon(BaseCloneNotPossible)  # a project's can_clone_table() false: views
TestClonePossible = on_paimon(BaseClonePossible)  # fails on parquet: dbt-spark clones only Delta
TestCloneSameTargetAndState = on_paimon(BaseCloneSameTargetAndState)
TestPersistDocsColumnMissing = on_paimon(BasePersistDocsColumnMissing)
TestPersistDocsAllColumnsMissing = on_paimon(BasePersistDocsAllColumnsMissing)
TestPersistDocsCommentOnQuotedColumn = on_paimon(BasePersistDocsCommentOnQuotedColumn)
TestPersistDocsQuotedColumnCaseSensitive = on_paimon(BasePersistDocsQuotedColumnCaseSensitive)
TestPersistDocsQuotedDescriptionNotAppliedOnMismatch = on_paimon(BasePersistDocsQuotedDescriptionNotAppliedOnMismatch)
TestChangeRelationTypeValidator = on_paimon(BaseChangeRelationTypeValidator)
TestDropSchemaNamed = on_paimon(BaseDropSchemaNamed)
TestStoreTestFailures = on_paimon(BaseStoreTestFailures)
TestStoreTestFailuresLimit = on_paimon(BaseStoreTestFailuresLimit)
TestUnitTestCaseInsensitivity = on_paimon(BaseUnitTestCaseInsensivity)
TestUnitTestInvalidInput = on_paimon(BaseUnitTestInvalidInput)
TestUnitTestingVarcharFixtureNoTruncation = on_paimon(BaseUnitTestingVarcharFixtureNoTruncation)


class TestMicrobatch(on_paimon(BaseMicrobatch)):
    """The microbatch model (unique_key 'id') is a Paimon key table, each batch replacing its day. Its input
    stays parquet: the test adds rows to the input with Spark SQL INSERT, which Paimon tables do not take
    from Spark SQL yet (the issue "Spark SQL on Paimon tables"); on parquet the class fails (dbt-spark's
    microbatch needs partition_by)."""

    @pytest.fixture(scope="class")
    def input_model_sql(self) -> str:
        return """
{{ config(materialized='table', file_format='parquet', event_time='event_time') }}
select 1 as id, TIMESTAMP '2020-01-01 00:00:00-0' as event_time
union all
select 2 as id, TIMESTAMP '2020-01-02 00:00:00-0' as event_time
union all
select 3 as id, TIMESTAMP '2020-01-03 00:00:00-0' as event_time
"""
