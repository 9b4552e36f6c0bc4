"""pytest setup of the dbt functional suite (dbt-tests-adapter) for `type: paimon`.

Every dbt command of the suite runs in this process (dbtRunner), on one SparkSession: the profile
below is the same for every test class, so Spark's static settings (catalog dir, master) agree.
"""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)  # tests.oracle (pypaimon helpers)

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from tests.spark_settings import INTERPRETED  # noqa: E402 (after ROOT is on sys.path)

pytest_plugins = ["dbt.tests.fixtures.project"]


def pytest_collection_modifyitems(session, config, items):
    """The integration project's test first: its second half then runs in this process, whose
    SparkSession must not have started yet (its static settings, spark_dir among them, are the
    project's), so that a process that did not build the tables is exercised without a third JVM."""
    first = [i for i in items if i.nodeid.startswith("integration_tests/functional/test_dbt_project.py")]
    items[:] = first + [i for i in items if i not in first]


@pytest.fixture(scope="session")
def paimon_home(tmp_path_factory):
    """The warehouse and Spark catalog dir shared by the whole session (one SparkSession)."""
    return tmp_path_factory.mktemp("dbt-paimon")


@pytest.fixture(scope="session")
def spark_dir(paimon_home):
    """Spark's catalog dir of this process's SparkSession (static once Spark runs)."""
    return str(paimon_home / "spark")


@pytest.fixture(scope="session")
def dbt_profile_target(paimon_home, spark_dir):
    return {
        "type": "paimon",
        "warehouse": str(paimon_home / "warehouse"),
        "spark_dir": spark_dir,
        "master": "local[2]",
        "threads": 1,
        "server_side_parameters": {
            "spark.sql.shuffle.partitions": "4",
            # dbt-tests-adapter fixtures insert strings into date columns (Spark 4's ANSI store
            # assignment refuses that)
            "spark.sql.storeAssignmentPolicy": "LEGACY",
            **INTERPRETED,  # tests/spark_settings.py says why
        },
    }
