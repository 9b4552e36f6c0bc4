import pytest


@pytest.fixture(params=["distributed", "local"])
def execution(request):
    """The two ways the engine runs an upsert job: the Spark job, and its topology inside the
    driver (engine/local.py); every result must be the same."""
    return request.param
