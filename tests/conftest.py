import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# before any test module imports it (tests/engine/other_writers.py does, ahead of java_paimon's
# conftest): detailed diffs from its assert_same
pytest.register_assert_rewrite("tests.java_paimon.javapaimon")


@pytest.fixture
def warehouse(tmp_path):
    """A fresh filesystem warehouse; tables live at <warehouse>/db.db/<name> as Paimon's catalog expects."""
    os.makedirs(tmp_path / "wh" / "db.db")
    return str(tmp_path / "wh")


@pytest.fixture
def table_path(warehouse):
    return os.path.join(warehouse, "db.db", "t")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local SparkSession for the whole test session (Spark takes ~10-20 s to start)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from dbt_paimon import local_session
    from dbt_paimon.engine import register

    scratch = tmp_path_factory.mktemp("spark")
    builder = SparkSession.builder
    for key, value in local_session.session_settings("local[2]", os.environ["PYSPARK_PYTHON"]).items():
        builder = builder.config(key, value)  # as the adapter's session (local_session.py)
    session = (builder.master("local[2]").appName("dbt-paimon-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.warehouse.dir", str(scratch / "spark-warehouse"))
               .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={scratch}")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
