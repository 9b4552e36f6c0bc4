import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# before any test module imports it (tests/engine/other_writers.py does, ahead of java_paimon's
# conftest): detailed diffs from its assert_same
pytest.register_assert_rewrite("tests.java_paimon.javapaimon")


@pytest.fixture(scope="session")
def java(tmp_path_factory):
    """Java Paimon (the release pinned in tests/java_paimon/reference.py) as an oracle, one per test session.
    Missing prerequisites fail the tests, never skip them: a silently skipped oracle would let a format
    regression pass."""
    import shutil

    from tests.java_paimon.fetch_jar import oracle_jars
    from tests.java_paimon.javapaimon import JavaPaimon

    for tool in ("java", "javac", "mvn"):
        if shutil.which(tool) is None:
            pytest.fail(f"the Java Paimon oracle needs `{tool}` (Java 17, Maven) on PATH", pytrace=False)
    try:
        jars, problem = oracle_jars(), None
    except Exception as e:  # noqa: BLE001 - any failure to fetch fails the tests with its message
        jars, problem = None, str(e)
    if problem:
        pytest.fail(f"cannot fetch Paimon's jar for the Java oracle (Maven Central once; "
                    f"`python tests/java_paimon/fetch_jar.py` fetches it): {problem}", pytrace=False)
    oracle = JavaPaimon(jars, str(tmp_path_factory.mktemp("java-paimon")))
    yield oracle
    oracle.close()


class PaimonSparks:
    """Paimon's own Spark connectors (tests/paimon_spark), one Spark process per release, started when a
    test first asks for it. Missing prerequisites fail the tests, never skip them."""

    def __init__(self, scratch):
        self.scratch, self.started = scratch, {}

    def __getitem__(self, line: str):
        from tests.paimon_spark.side_env import PaimonSpark

        if line not in self.started:
            try:
                self.started[line], problem = PaimonSpark(str(self.scratch / f"spark-{line}.log"), line=line), None
            except Exception as e:  # noqa: BLE001 - any failure to start fails the tests with its message
                problem = str(e)
            if problem:
                pytest.fail(f"cannot set up Paimon's Spark connector {line} (`python tests/paimon_spark/side_env.py`): "
                            f"{problem}", pytrace=False)
        return self.started[line]

    def close(self) -> None:
        for client in self.started.values():
            client.close()


@pytest.fixture(scope="session")
def paimon_sparks(tmp_path_factory):
    connectors = PaimonSparks(tmp_path_factory.mktemp("paimon-spark"))
    yield connectors
    connectors.close()


@pytest.fixture(scope="session")
def paimon_spark(paimon_sparks):
    """Paimon 0.9's Spark connector (Spark 3.5)."""
    return paimon_sparks["0.9"]


@pytest.fixture(scope="session")
def paimon_spark_2(paimon_sparks):
    """Paimon 2.0's Spark connector (Spark 4.0): the current release."""
    return paimon_sparks["2.0"]


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

    from dbt_paimon.engine.runtime import local_session
    from dbt_paimon.sql import register
    from tests.spark_settings import INTERPRETED

    scratch = tmp_path_factory.mktemp("spark")
    builder = SparkSession.builder
    settings = {**local_session.session_settings("local[2]", os.environ["PYSPARK_PYTHON"]), **INTERPRETED}
    for key, value in settings.items():
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


@pytest.fixture(params=["distributed", "local"])
def execution(request):
    """The two ways the engine runs an upsert job: the Spark job, and its topology inside the
    driver (engine/runtime/local.py); every result must be the same."""
    return request.param


@pytest.fixture(params=["local", "s3"])
def store_warehouse(request):
    """A warehouse on the local disk, then one on the S3 server (the suite's core runs on both)."""
    return request.getfixturevalue("warehouse" if request.param == "local" else "s3_warehouse")
