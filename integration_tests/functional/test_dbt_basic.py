"""dbt-tests-adapter's basic suite on `type: paimon` with dbt-spark's default file format: dbt-spark's
materializations keep working under our adapter. (The same suite with every table a Paimon table, and the
classes that do not depend on the format, run in test_dbt_upstream_on_paimon.py.)"""

import getpass

import pytest
from dbt.tests.adapter.basic.expected_catalog import base_expected_catalog, no_stats
from dbt.tests.adapter.basic.test_base import BaseSimpleMaterializations
from dbt.tests.adapter.basic.test_docs_generate import BaseDocsGenerate


class TestSimpleMaterializationsPaimon(BaseSimpleMaterializations):
    pass


class TestSimpleMaterializationsPaimonUpsert(BaseSimpleMaterializations):
    """The same, the incremental step being a Paimon table (incremental_strategy='paimon_upsert'):
    a table replaced by a view, then the view replaced by a Paimon table."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"name": "base", "models": {"+incremental_strategy": "paimon_upsert", "+unique_key": "id"}}


class TestDocsGeneratePaimon(BaseDocsGenerate):
    @pytest.fixture(scope="class")
    def expected_catalog(self, project):
        return base_expected_catalog(
            project,
            role=getpass.getuser(),  # Spark records the OS user as the owner
            id_type="long",
            text_type="string",
            time_type="timestamp",
            view_type="view",
            table_type="table",
            model_stats=no_stats(),
        )
