"""Every test here runs against each release of Paimon's Spark connector (side_env.LINES): 0.9 on
Spark 3.5 and 2.0 on Spark 4.0, the current release. `paimon_spark.line.name` says which, where their
behaviour differs (each difference is named in the test)."""

import pytest


@pytest.fixture(scope="session", params=["0.9", "2.0"], ids=lambda line: f"paimon-spark-{line}")
def paimon_spark(request, paimon_sparks):
    return paimon_sparks[request.param]
