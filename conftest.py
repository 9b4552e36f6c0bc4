"""Fixtures every test directory shares: one local S3-compatible server per test session
(tests/s3.py), started as a subprocess and stopped at the end."""

import os
import subprocess
import sys
import uuid

import pytest

from tests import schedule
from tests.s3 import BUCKET, free_port, make_user, start_moto


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The order units of work are handed out in (tests/schedule.py); serial runs keep it too."""
    items[:] = schedule.order(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`-n N --dist loadscope`: a unit of tests/schedule.py goes whole to one worker."""
    if config.getvalue("dist") == "loadscope":
        return schedule.scheduler(config, log)
    return None


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    port = free_port()
    proc = start_moto(port, str(tmp_path_factory.mktemp("moto") / "moto.log"))
    server = make_user(f"http://127.0.0.1:{port}")
    server.client().create_bucket(Bucket=BUCKET)
    yield server
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture
def s3_warehouse(s3_server):
    """A fresh warehouse under its own prefix of the test bucket; the store settings are this
    process's configured ones while the test runs (as the dbt profile would set them)."""
    from pyspark.sql import SparkSession

    from dbt_paimon.sql import register
    from dbt_paimon.store.common import fileio

    def configure(options):
        fileio.configure(options)
        spark = SparkSession.getActiveSession()
        if spark is not None:  # the `paimon` source carries the settings to Spark's Python workers
            register(spark)

    configure(s3_server.options)
    yield f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}/wh"
    configure(None)


os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Every JVM the suite starts (Spark drivers in this process and in children, a cluster's master,
# workers and executors, Java Paimon) compiles with C1 only: a test JVM lives seconds to minutes on
# tiny data, where C2's compiler threads cost more CPU than its code saves. On the integration
# project's three batches the JVM used 65 CPU-s instead of 139 (tests only: the product's JVMs
# keep the JDK's default).
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")
