import pytest


@pytest.fixture(params=["distributed", "local"])
def execution(request):
    """The two ways the engine runs an upsert job: the Spark job, and its topology inside the
    driver (engine/local.py); every result must be the same."""
    return request.param


@pytest.fixture(params=["local", "s3"])
def store_warehouse(request):
    """A warehouse on the local disk, then one on the S3 server (the suite's core runs on both)."""
    return request.getfixturevalue("warehouse" if request.param == "local" else "s3_warehouse")
