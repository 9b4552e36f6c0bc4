"""Every test here runs against each release of Paimon's Spark connector (side_env.LINES): 0.9 on
Spark 3.5 and 2.0 on Spark 4.0, the current release. `paimon_spark.line.name` says which, where their
behaviour differs (each difference is named in the test)."""

import pytest

from .side_env import LINES, release_id


@pytest.fixture(scope="session", params=list(LINES), ids=release_id)
def paimon_spark(request, paimon_sparks):
    return paimon_sparks[request.param]
