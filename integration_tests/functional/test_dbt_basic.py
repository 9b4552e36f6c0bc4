"""dbt-tests-adapter's basic suite on `type: paimon`: dbt-spark's materializations keep working
under our adapter (the classes dbt-spark itself skips on its session method pass here too)."""

import getpass

import pytest
from dbt.tests.adapter.basic.expected_catalog import base_expected_catalog, no_stats
from dbt.tests.adapter.basic.test_adapter_methods import BaseAdapterMethod
from dbt.tests.adapter.basic.test_base import BaseSimpleMaterializations
from dbt.tests.adapter.basic.test_docs_generate import BaseDocsGenerate
from dbt.tests.adapter.basic.test_empty import BaseEmpty
from dbt.tests.adapter.basic.test_ephemeral import BaseEphemeral
from dbt.tests.adapter.basic.test_generic_tests import BaseGenericTests
from dbt.tests.adapter.basic.test_singular_tests import BaseSingularTests
from dbt.tests.adapter.basic.test_validate_connection import BaseValidateConnection


class TestSimpleMaterializationsPaimon(BaseSimpleMaterializations):
    pass


class TestSimpleMaterializationsPaimonUpsert(BaseSimpleMaterializations):
    """The same, the incremental step being a Paimon table (incremental_strategy='paimon_upsert'):
    a table replaced by a view, then the view replaced by a Paimon table."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"name": "base", "models": {"+incremental_strategy": "paimon_upsert", "+unique_key": "id"}}


class TestSingularTestsPaimon(BaseSingularTests):
    pass


class TestEmptyPaimon(BaseEmpty):
    pass


class TestEphemeralPaimon(BaseEphemeral):
    pass


class TestGenericTestsPaimon(BaseGenericTests):
    pass


class TestAdapterMethodPaimon(BaseAdapterMethod):
    pass


class TestValidateConnectionPaimon(BaseValidateConnection):
    pass


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
