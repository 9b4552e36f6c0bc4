"""What every engine job shares: task descriptors as a DataFrame, session settings for the job, and
collecting the small per-task payloads with our own errors raised as themselves."""

from __future__ import annotations

import pickle
import re
from contextlib import contextmanager
from typing import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession

from ..store.errors import CorruptTableError, DataError, SchemaError
from . import deploy

# Arrow batches between the JVM and Python workers: large enough that per-batch overhead vanishes.
JOB_SETTINGS = {"spark.sql.execution.arrow.maxRecordsPerBatch": "200000",
                "spark.sql.adaptive.coalescePartitions.enabled": "false"}
_ERRORS = {"DataError": DataError, "SchemaError": SchemaError, "CorruptTableError": CorruptTableError}


def descriptors(spark: SparkSession, items: Sequence[object]) -> DataFrame:
    """One row (column `blob`: the item pickled) and one Spark partition per task descriptor."""
    rdd = spark.sparkContext.parallelize([(pickle.dumps(i),) for i in items], max(len(items), 1))
    return spark.createDataFrame(rdd, "blob binary")


@contextmanager
def spark_conf(spark: SparkSession, settings: Mapping[str, str]):
    old = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def reraise_task_error(exc: Exception) -> None:
    """An error of ours raised on an executor reaches the driver as text inside a Spark exception:
    raise it again as itself, so a user sees 'primary key column ... is null', not a JVM trace."""
    m = re.search(r"dbt_paimon\.store\.errors\.(DataError|SchemaError|CorruptTableError): (.+)", str(exc))
    if m:
        raise _ERRORS[m.group(1)](m.group(2).strip()) from None
    missing = deploy.missing_module_error(str(exc))  # an executor that joined after deploy's check
    if missing is not None:
        raise missing from None


def collect_payloads(spark: SparkSession, df: DataFrame, column: str = "payload") -> list:
    """Run the job; the unpickled payload of every row (small metadata, never table rows)."""
    with spark_conf(spark, JOB_SETTINGS):
        try:
            rows = df.collect()
        except Exception as e:  # noqa: BLE001 - translated when it is one of ours
            reraise_task_error(e)
            raise
    return [pickle.loads(r[column]) for r in rows]
