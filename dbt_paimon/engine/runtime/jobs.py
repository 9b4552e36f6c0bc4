"""What every engine job shares: task descriptors as a DataFrame, session settings for the job, and
collecting the small per-task payloads with our own errors raised as themselves."""

from __future__ import annotations

import pickle
import re
import threading
from contextlib import contextmanager
from typing import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from ...store.common.errors import CorruptTableError, DataError, SchemaError
from ...store.common.options import parse_memory
from . import deploy
from ..spark_types import arrow_row_bytes

# Arrow batches between the JVM and Python workers: large enough that per-batch overhead vanishes.
MAX_BATCH_ROWS = 200_000
JOB_SETTINGS = {"spark.sql.execution.arrow.maxRecordsPerBatch": str(MAX_BATCH_ROWS),
                "spark.sql.adaptive.coalescePartitions.enabled": "false"}
_MAX_BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"
_NO_BYTE_BOUND = (1 << 31) - 1  # the one value of _MAX_BYTES at which Spark skips its per-row check
_ERRORS = {"DataError": DataError, "SchemaError": SchemaError, "CorruptTableError": CorruptTableError}


def rows_settings(spark: SparkSession, row_schema: StructType) -> dict[str, str]:
    """JOB_SETTINGS for a job whose mapInArrow stages read rows of row_schema (the batch's):
    Spark's byte bound on an Arrow batch (maxBytesPerBatch, 64 MB by default) as a row count.

    Why: unless that bound is Int.MaxValue, Spark (4.3, as its bytecode reads) sizes the Arrow
    batch after every row it adds (BatchedPythonArrowInput.underBatchSizeLimit: setValueCount and
    getBufferSizeFor on every column), ~0.6 s of JVM CPU in W2's 1M-row route task. So the bound
    is turned off and the batch is bounded by rows instead: as many as the session's byte bound
    holds at the schema's row width (spark_types.arrow_row_bytes, which assumes 256 bytes per
    string or binary value).

    The job's stages over packed rows (PACKED: a few large values) get the same row count, so a
    batch there may hold a task's whole share: those tasks hold their share anyway (tasks.unpack).
    """
    budget = byte_size(spark.conf.get(_MAX_BYTES, None) or "64m")
    rows = max(1, min(MAX_BATCH_ROWS, budget // arrow_row_bytes(row_schema)))
    return {**JOB_SETTINGS, "spark.sql.execution.arrow.maxRecordsPerBatch": str(rows), _MAX_BYTES: str(_NO_BYTE_BOUND)}


def byte_size(text: str) -> int:
    """A Spark byte-size setting ("64m", "67108864b", "1g", "4096") in bytes: the units are
    Paimon's memory sizes' (options.parse_memory)."""
    try:
        return parse_memory(_MAX_BYTES, text)
    except SchemaError:  # not a table option: said as the Spark setting it is
        raise ValueError(f"{_MAX_BYTES} is {text!r}, not a byte size such as 64m") from None


def descriptors(spark: SparkSession, items: Sequence[object]) -> DataFrame:
    """One row (column `blob`: the item pickled) and one Spark partition per task descriptor."""
    rdd = spark.sparkContext.parallelize([(pickle.dumps(i),) for i in items], max(len(items), 1))
    return spark.createDataFrame(rdd, "blob binary")


# Session settings jobs have set and the values they replaced: (session, key) -> [the value before
# the first of them (None: unset), how many jobs hold it]. Jobs of several threads (dbt threads,
# writers racing) overlap: each putting back the value it found would leave the last one's setting
# in the session for good, so the value before them all comes back when the last one ends.
_held: dict[tuple[int, str], list] = {}
_held_lock = threading.Lock()


@contextmanager
def spark_conf(spark: SparkSession, settings: Mapping[str, str]):
    """The session's settings while a job runs; the user's values back when no job needs them."""
    with _held_lock:
        for k, v in settings.items():
            held = _held.setdefault((id(spark), k), [spark.conf.get(k, None), 0])
            held[1] += 1
            spark.conf.set(k, v)
    try:
        yield
    finally:
        with _held_lock:
            for k in settings:
                held = _held[(id(spark), k)]
                held[1] -= 1
                if held[1] == 0:
                    del _held[(id(spark), k)]
                    if held[0] is None:
                        spark.conf.unset(k)
                    else:
                        spark.conf.set(k, held[0])


# as a task's traceback names them: by their module's name (never written out, so it follows a move)
_OUR_ERROR = re.compile(re.escape(DataError.__module__) + r"\.(DataError|SchemaError|CorruptTableError): (.+)")


def reraise_task_error(exc: Exception) -> None:
    """An error of ours raised on an executor reaches the driver as text inside a Spark exception:
    raise it again as itself, so a user sees 'primary key column ... is null', not a JVM trace."""
    m = _OUR_ERROR.search(str(exc))
    if m:
        raise _ERRORS[m.group(1)](m.group(2).strip()) from None
    missing = deploy.missing_module_error(str(exc))  # an executor that joined after deploy's check
    if missing is not None:
        raise missing from None


def collect_payloads(spark: SparkSession, df: DataFrame, column: str = "payload",
                     settings: Mapping[str, str] = JOB_SETTINGS) -> list:
    """Run the job; the unpickled payload of every row (small metadata, never table rows)."""
    with spark_conf(spark, settings):
        try:
            rows = df.collect()
        except Exception as e:  # noqa: BLE001 - translated when it is one of ours
            reraise_task_error(e)
            raise
    return [pickle.loads(r[column]) for r in rows]
