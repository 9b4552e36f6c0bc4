"""One standalone Spark cluster (a master and two 1-core workers, each its own JVM) for the whole test
session, and executor Pythons without dbt_paimon. Each scenario is one Spark application in a child
process (standalone.run_child): PySpark allows one SparkContext per process, and the test process
may hold the suite's local one already."""

from __future__ import annotations

import pytest

from tests.cluster import standalone


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    c = standalone.start(str(tmp_path_factory.mktemp("cluster")), workers=2, cores=1, memory="1g")
    yield c
    c.stop()


@pytest.fixture(scope="session")
def executor_pythons(tmp_path_factory) -> dict:
    """Wrapper scripts: `full` has everything but dbt_paimon; `no_fastavro` lacks fastavro too;
    `other_minor` is another CPython minor version (None when the machine has none)."""
    root = tmp_path_factory.mktemp("executor-pythons")
    other = standalone.other_minor_python()
    return {
        "full": standalone.executor_python(str(root / "full")),
        "no_fastavro": standalone.executor_python(
            str(root / "no-fastavro"), tuple(m for m in standalone.EXECUTOR_MODULES if m != "fastavro")),
        "other_minor": standalone.executor_python(str(root / "other"), interpreter=other) if other else None,
    }
