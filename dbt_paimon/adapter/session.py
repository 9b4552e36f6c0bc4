"""The one SparkSession of a dbt process: dbt-spark's `session` method, the engine and the catalog share it.

dbt-spark's session cursor runs every statement on `SparkSession.builder.enableHiveSupport()` +
the profile's settings + `getOrCreate()`; we build it the same way, so all three get the same
session. Settings that only apply when a session starts (master, warehouse dir, Derby home) are
given on the first creation, here, when the first connection opens.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

from dbt.adapters.events.logging import AdapterLogger
from pyspark.sql import SparkSession

from ..engine import register
from ..store import fileio
from . import catalog
from .credentials import PaimonCredentials

log = AdapterLogger("Paimon")

_lock = threading.RLock()
_ready: dict[tuple[int, str], dict] = {}  # (session, warehouse) -> sync counts


def build(settings: dict[str, str]) -> SparkSession:
    """The process's SparkSession, built exactly as dbt-spark's session cursor builds it."""
    # Executors run our tasks in Python: they need this interpreter (pyarrow, dbt_paimon).
    # An in-process SparkSession takes its workers' Python from the environment only: a profile's
    # spark.pyspark.python goes there.
    os.environ.setdefault("PYSPARK_PYTHON", settings.get("spark.pyspark.python") or sys.executable)
    builder = SparkSession.builder.enableHiveSupport()
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _quiet() -> None:
    # pyspark 4 logs a JSON stack trace for every AnalysisException, including the expected ones
    # (dbt asks about relations that do not exist yet); the error still reaches dbt.
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    logging.getLogger("py4j").setLevel(logging.WARNING)


def spark_for(credentials: PaimonCredentials) -> SparkSession:
    """The SparkSession for these credentials, started and made ready on first use in the process:
    the `paimon` source registered and every Paimon table of the warehouse exposed to SQL."""
    current = getattr(SparkSession, "_instantiatedSession", None)
    if current is not None and current._sc._jsc is not None and (id(current), credentials.warehouse) in _ready \
            and fileio.configured() == credentials.storage_settings():
        return current  # the common case: ready already, no settings to send again
    with _lock:
        settings = credentials.spark_settings()
        started = SparkSession.getActiveSession() is None and SparkSession._instantiatedSession is None
        t0 = time.time()
        spark = build(settings)
        key = (id(spark), credentials.warehouse)
        if fileio.configured() != credentials.storage_settings():
            # the store settings every FileIO of this process uses, and the `paimon` source and
            # table sources carry to Spark's Python workers
            fileio.configure(credentials.storage_settings())
            register(spark)
            catalog.forget_sources()
            _ready.pop(key, None)
        if key in _ready:
            return spark
        if not any(k[0] == id(spark) for k in _ready):
            catalog.forget_sources()
        _quiet()
        if started:
            log.debug(f"Spark started in {time.time() - t0:.1f}s")
        else:
            _warn_on_static_mismatch(spark, settings)
        register(spark)  # ships dbt_paimon to a cluster's executors first (engine/source.py)
        if not fileio.scheme_of(credentials.warehouse):
            os.makedirs(credentials.warehouse, exist_ok=True)
        _ready[key] = catalog.sync(spark, credentials.warehouse, [credentials.schema] if credentials.schema else [])
        log.debug(f"catalog synced with {credentials.warehouse}: {_ready[key]}")
        return spark


def _warn_on_static_mismatch(spark: SparkSession, settings: dict[str, str]) -> None:
    conf = spark.sparkContext.getConf()
    wanted = settings.get("spark.sql.warehouse.dir")
    actual = conf.get("spark.sql.warehouse.dir", None)
    if wanted and actual and os.path.normpath(actual.removeprefix("file:")) != os.path.normpath(wanted):
        log.warning(f"this process already runs a SparkSession whose catalog lives in {actual}, not {wanted}; "
                    f"Spark cannot move it, so that one is used")
