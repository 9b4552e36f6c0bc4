"""An error of ours raised in a Spark task reaches the user as itself (its own class and words), not as
the JVM's trace around a Python traceback: the driver finds it in the trace by its module's name."""

import pyarrow as pa
import pytest

from dbt_paimon.engine.runtime import jobs
from dbt_paimon.store import DataError


def _failing(batches):
    for _ in batches:
        raise DataError("primary key column 'id' is null in 1 row(s)")
    yield pa.RecordBatch.from_pydict({"payload": pa.array([], pa.binary())})


def test_a_tasks_error_of_ours_is_raised_again_as_itself(spark):
    df = spark.range(1).mapInArrow(_failing, "payload binary")
    with pytest.raises(DataError) as raised:
        jobs.collect_payloads(spark, df)
    assert str(raised.value) == "primary key column 'id' is null in 1 row(s)"


def test_an_error_that_is_not_ours_stays_sparks():
    with pytest.raises(RuntimeError):
        try:
            raise RuntimeError("py4j: ValueError: not ours")
        except RuntimeError as e:
            jobs.reraise_task_error(e)
            raise
