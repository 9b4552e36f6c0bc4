"""The one SparkSession of a dbt process: the session cursor, the engine and the catalog share it.

It is built as dbt-spark's `session` method builds it (SparkSession.builder + the profile's settings
+ getOrCreate()), with Spark's in-memory catalog instead of Hive's: any number of dbt processes
can then work on one project at once, each with its own catalog, rebuilt when it opens from the
warehouse (Paimon tables, catalog.sync) and from the records of Spark's own relations
(spark_relations.py). Settings that only apply when a session starts (master, warehouse dir, Java
options) are given on the first creation, here, when the first connection opens.

Spark's JVM writes to `spark.log` in dbt's log directory, never to the console: the JVM is launched
with its stdout and stderr on that file, and log4j (log4j2.properties) appends there too. A failure
to start Spark becomes one paragraph naming the root cause (SparkStartError); its trace stays in
that file. The JVM maps its classes from a CDS archive when there is one (jvm_cache.py), and for
commands that connect it starts while dbt parses the project (start_early).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from typing import Iterator, Optional

from dbt.adapters.events.logging import AdapterLogger
from pyspark.sql import SparkSession

from ..sql import catalog, register
from ..engine import warm_up
from ..store import fileio
from . import jvm_cache
from .credentials import PaimonCredentials, quote_option
from .locks import HeldLocks, lock_path
from .spark_relations import RelationStore

log = AdapterLogger("Paimon")

_lock = threading.RLock()
_ready: dict[tuple[int, str], dict] = {}  # (session, warehouse) -> sync counts
_stores: dict[int, Optional[RelationStore]] = {}  # session -> its persisted catalog (None: Hive's)
# Seconds of each start-up step in this process, for the debug log and bench/startup_bench.py
STARTUP: dict[str, float] = {}
JVM_ARCHIVE: list[str] = []  # the CDS archive this process's JVM started from, if any (jvm_cache.py)
LOG_FILE_NAME = "spark.log"
_LOG_ROTATE_BYTES = 20 * 2**20


class SparkStartError(RuntimeError):
    """Spark could not start; the message is the root cause in one paragraph."""


def log_file() -> str:
    """Where Spark's JVM writes: spark.log beside dbt's own log (dbt's --log-path, default <project>/logs)."""
    path = None
    try:
        from dbt.flags import get_flags

        path = getattr(get_flags(), "LOG_PATH", None)
    except Exception:  # noqa: BLE001 - outside a dbt invocation: the working directory's logs/
        path = None
    return os.path.join(os.path.abspath(str(path or "logs")), LOG_FILE_NAME)


def _open_log(path: str):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        if os.path.getsize(path) > _LOG_ROTATE_BYTES:  # one old generation is kept, as a small bound
            os.replace(path, path + ".1")
    except OSError:
        pass
    return open(path, "ab")


def build(settings: dict[str, str], log_to: Optional[str] = None) -> SparkSession:
    """The process's SparkSession, built from these settings (getOrCreate: an existing one is reused).
    log_to: a file for the JVM's console output, when this call starts the JVM."""
    from pyspark import SparkContext

    # Executors run our tasks in Python: they need this interpreter (pyarrow, dbt_paimon).
    # An in-process SparkSession takes its workers' Python from the environment only: a profile's
    # spark.pyspark.python goes there.
    os.environ.setdefault("PYSPARK_PYTHON", settings.get("spark.pyspark.python") or sys.executable)
    if log_to and SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        _launch_jvm(settings, log_to)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _launch_jvm(settings: dict[str, str], log_to: str) -> None:
    """Start Spark's JVM as SparkContext would (spark-submit with the settings), with its stdout and
    stderr on the log file: the JVM's own warnings, Spark's banner and the Python workers' stderr
    (which the JVM forwards) never reach dbt's console."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    t0 = time.time()
    cds, archive = jvm_cache.java_options(settings)
    conf = SparkConf(loadDefaults=False)
    for key, value in settings.items():
        conf.set(key, value)
    if cds:
        java = " ".join([settings.get("spark.driver.extraJavaOptions", ""), *map(quote_option, cds)]).strip()
        conf.set("spark.driver.extraJavaOptions", java)
    with _open_log(log_to) as out:
        start = out.tell()
        try:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": out, "stderr": out})
        except Exception as e:  # noqa: BLE001 - the JVM did not come up: its own words are in the file
            out.flush()
            raise SparkStartError(_jvm_exit_reason(log_to, start) or str(e)) from e
    if archive:
        jvm_cache.check_used(archive, _read_from(log_to, start))
        JVM_ARCHIVE.append(archive)
    SparkContext._ensure_initialized(gateway=gateway)
    STARTUP["jvm"] = time.time() - t0


_JVM_NOISE = re.compile(r"^(WARNING: Using incubator modules|Picked up |NOTE: Picked up|"
                        r"\d\d/\d\d/\d\d \d\d:\d\d:\d\d \[\d+\] (?:WARN|INFO|DEBUG) )")
_JVM_GENERIC = re.compile(r"^Error: (Could not create the Java Virtual Machine|A fatal exception has occurred)")
# A Java exception as printed: a qualified class name (the JVM's own "Error: ..." lines are not)
_JAVA_EXCEPTION = re.compile(r'^(?:Exception in thread "[^"]*" |Caused by: )?(?:[\w$]+\.)+([\w$]*(?:Exception|Error))'
                             r'(?:: (.*))?$')


def _read_from(path: str, start: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(start)
            return f.read(64 * 1024).decode("utf-8", "replace")
    except OSError:
        return ""


def _jvm_exit_reason(path: str, start: int) -> str:
    """What a JVM that exited at once wrote, as the root cause in a sentence: the innermost Java
    exception (a bad master URL, a missing class), else the JVM's own words (an option it cannot
    take, no memory, no Java) without its generic closing lines."""
    text = _read_from(path, start)
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not line.startswith(("\tat ", "\t... ")) and not _JVM_NOISE.match(line)]
    exceptions = [m for m in map(_JAVA_EXCEPTION.match, lines) if m]
    if exceptions:
        name, message = exceptions[-1].group(1), (exceptions[-1].group(2) or "").strip()
        return f"{message} ({name})" if message else name
    specific = [line for line in lines if not _JVM_GENERIC.match(line)] or lines
    if not specific:
        return ""
    return (" ".join(line.rstrip(".") + "." for line in specific[:3]) +
            " Spark's JVM exited at once: check spark.driver.extraJavaOptions, spark.driver.memory and JAVA_HOME")


def _java_throwable(exc: BaseException):
    """The Java exception behind a Py4J error (or pyspark's conversion of one), if any."""
    seen = 0
    while exc is not None and seen < 20:
        java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
        if java is not None:
            return java
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def root_cause(exc: BaseException) -> str:
    """The innermost Java exception's `message (Class)` of a Py4J error, else the Python error's text."""
    java = _java_throwable(exc)
    if java is not None:
        try:
            seen = 0
            while java.getCause() is not None and seen < 50:
                java = java.getCause()
                seen += 1
            name = str(java.getClass().getName()).rsplit(".", 1)[-1]
            message = str(java.getMessage() or "").strip()
            return f"{message} ({name})" if message else name
        except Exception:  # noqa: BLE001 - the gateway is gone: the Python text will do
            pass
    text = str(exc).split("\n\tat ", 1)[0].strip()
    return text.splitlines()[-1].strip() if "Traceback (most recent call last)" in text else " ".join(text.split())


def start_failure(exc: BaseException, credentials: PaimonCredentials) -> str:
    """One paragraph for dbt's console; the full trace goes to Spark's log file."""
    path = log_file()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a") as f:
            f.write(f"{time.strftime('%y/%m/%d %H:%M:%S')} dbt-paimon could not start Spark (pid {os.getpid()}):\n")
            f.write("".join(traceback.format_exception(exc)))
    except OSError:
        pass
    cause = str(exc) if isinstance(exc, SparkStartError) else root_cause(exc)
    if "XSDB6" in cause or "Another instance of Derby" in cause:
        cause = (f"Spark's Hive metastore (Derby, in {credentials.spark_dir}/metastore_db) is open in another process, "
                 f"and Derby admits one process at a time. Drop spark.sql.catalogImplementation: hive from the "
                 f"profile to use dbt-paimon's own catalog, which any number of dbt processes share, or give Hive a "
                 f"metastore server (spark.hadoop.hive.metastore.uris)")
    return f"{cause.rstrip('.')}. The full trace is in {path}"


class _ToDbtLog(logging.Handler):
    """The engine's Python log (`dbt_paimon.*`) into dbt's: its warnings as dbt warnings (a catalog
    entry skipped, an index not updated), the rest in dbt's debug log."""

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.levelno >= logging.WARNING:
            log.warning(message)
        else:
            log.debug(message)


def _quiet() -> None:
    # pyspark 4 logs a JSON stack trace for every AnalysisException, including the expected ones
    # (dbt asks about relations that do not exist yet); the error still reaches dbt.
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    ours = logging.getLogger("dbt_paimon")
    if not any(isinstance(h, _ToDbtLog) for h in ours.handlers):
        ours.addHandler(_ToDbtLog())
        ours.setLevel(logging.DEBUG)
        ours.propagate = False


# dbt commands that open a connection, for which Spark may start while dbt parses the project
CONNECTING_COMMANDS = {"run", "build", "seed", "test", "snapshot", "show", "generate", "compile", "run-operation",
                       "retry", "clone", "freshness", "debug"}
# Commands that read tables with SQL (ref() in a model, a test, `dbt show`, a snapshot's source):
# their Python worker daemons are started ahead of the first read (engine/warm_up.py)
READING_COMMANDS = {"run", "build", "test", "show", "snapshot", "retry"}
UPSERTING_COMMANDS = {"run", "build", "snapshot", "retry"}  # ... and may hand a batch to the engine


def _command() -> Optional[str]:
    try:
        from dbt.flags import get_flags

        return getattr(get_flags(), "WHICH", None)
    except Exception:  # noqa: BLE001 - outside a dbt invocation
        return None


def start_early(credentials: PaimonCredentials) -> None:
    """Start Spark, and make it ready (catalog sync, relations restored), in a background thread
    when dbt loads the adapter, so that the JVM starts while dbt parses the project and sets up the
    run on the other core; the first connection then waits for it (spark_for holds the same lock)
    and a failure is raised there, again. Only for commands that will connect."""
    command = _command()
    if command not in CONNECTING_COMMANDS or getattr(SparkSession, "_instantiatedSession", None) is not None:
        return
    if os.environ.get("DBT_PAIMON_EARLY_START", "1") == "0":
        return

    def run() -> None:
        try:
            spark_for(credentials)
        except BaseException as e:  # noqa: BLE001 - the connection that needs Spark reports it
            log.debug(f"Spark did not start ahead of the first connection: {e}")

    threading.Thread(target=run, name="dbt-paimon-spark-start", daemon=True).start()


@contextmanager
def writing_relation(spark: SparkSession, credentials: PaimonCredentials, schema: str, name: str) -> Iterator[None]:
    """Around a write of a Spark relation that does not go through the session cursor (a Python
    model's DataFrame written with saveAsTable): the relation's exclusive lock while it runs, and its
    record after, so that other dbt processes see it (spark_relations.py, locks.py)."""
    store = relation_store(spark)
    if store is None:
        yield
        return
    held = HeldLocks()
    what = f"{schema.lower()}.{name.lower()}"
    held.acquire(lock_path(store.lock_root(), schema.lower(), name.lower()), what, True, credentials.lock_timeout,
                 log.info)
    try:
        store.refresh(spark)
        yield
    finally:
        try:
            store.record(spark, schema, name)
        finally:
            held.release_all()


def relation_store(spark: SparkSession) -> Optional[RelationStore]:
    """The persisted catalog of Spark's own relations for this session; None when the session keeps
    them itself (a Hive metastore chosen in the profile)."""
    return _stores.get(id(spark))


def spark_for(credentials: PaimonCredentials) -> SparkSession:
    """The SparkSession for these credentials, started and made ready on first use in the process:
    the `paimon` source registered, every Paimon table of the warehouse and every recorded Spark
    relation declared in its catalog."""
    current = getattr(SparkSession, "_instantiatedSession", None)
    if current is not None and current._sc._jsc is not None and (id(current), credentials.warehouse) in _ready \
            and fileio.configured() == credentials.storage_settings():
        return current  # the common case: ready already, no settings to send again
    with _lock:
        started = SparkSession.getActiveSession() is None and SparkSession._instantiatedSession is None
        settings = credentials.spark_settings(log_file() if started else None)
        t0 = time.time()
        spark = build(settings, log_to=log_file() if started else None)
        if started:
            STARTUP["session"] = time.time() - t0 - STARTUP.get("jvm", 0.0)
            if _command() in READING_COMMANDS and os.environ.get("DBT_PAIMON_WARM_UP", "1") != "0":
                # while the sources are registered and the catalog synced
                warm_up.start(spark, upserts=_command() in UPSERTING_COMMANDS)
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
        if not started:
            _warn_on_static_mismatch(spark, settings)
        store = _store_for(spark, credentials)
        t = time.time()
        register(spark)  # ships dbt_paimon to a cluster's executors first (engine/read/source.py)
        STARTUP["register"] = time.time() - t
        if not fileio.scheme_of(credentials.warehouse):
            os.makedirs(credentials.warehouse, exist_ok=True)
        t = time.time()
        counts = catalog.sync(spark, credentials.warehouse, [credentials.schema] if credentials.schema else [])
        STARTUP["sync"] = time.time() - t
        if store is not None:
            t = time.time()
            restored = store.restore(spark)
            STARTUP["restore"] = time.time() - t
            log.debug(f"Spark relations restored from {store.root}: {restored}")
        if started:
            log.debug("Spark started: " + ", ".join(f"{k} {v:.2f}s" for k, v in STARTUP.items()))
        log.debug(f"catalog synced with {credentials.warehouse}: {counts}")
        _ready[key] = counts  # last: a connection that finds it (without the lock) finds everything declared
        return spark


def _store_for(spark: SparkSession, credentials: PaimonCredentials) -> Optional[RelationStore]:
    if id(spark) not in _stores:
        conf = spark.sparkContext.getConf()
        store = None
        if conf.get("spark.sql.catalogImplementation", "in-memory") != "hive":
            tables = conf.get("spark.sql.warehouse.dir", None) or os.path.join(credentials.spark_dir, "tables")
            store = RelationStore(credentials.spark_dir, tables.removeprefix("file:"))
            if os.path.isdir(os.path.join(credentials.spark_dir, "metastore_db")) and not os.path.isdir(store.root):
                log.info(f"dbt-paimon no longer keeps Spark's catalog in Hive's metastore ({credentials.spark_dir}/"
                         f"metastore_db): seeds, views and `table` models made before are rebuilt by the next dbt seed "
                         f"and dbt run; metastore_db and spark-warehouse/ there can be deleted")
        _stores[id(spark)] = store
    return _stores[id(spark)]


def sync_schema(spark: SparkSession, credentials: PaimonCredentials, schema: str) -> None:
    """When dbt lists a schema's relations: Paimon tables another process created or changed since
    this one opened are declared too (a listing of the schema's directory and each table's latest
    schema file), and recorded views waiting for them follow."""
    with _lock:
        try:
            counts = catalog.sync(spark, credentials.warehouse, [schema], only=schema)
        except Exception as e:  # noqa: BLE001 - listing must not fail for this; the open-time sync stands
            log.debug(f"sync of schema {schema} skipped: {e}")
            return
        store = relation_store(spark)
        if store is not None and (counts.get("created") or counts.get("dropped")):
            store.retry_waiting(spark)


def _warn_on_static_mismatch(spark: SparkSession, settings: dict[str, str]) -> None:
    conf = spark.sparkContext.getConf()
    wanted = settings.get("spark.sql.warehouse.dir")
    actual = conf.get("spark.sql.warehouse.dir", None)
    if wanted and actual and os.path.normpath(actual.removeprefix("file:")) != os.path.normpath(wanted):
        log.warning(f"this process already runs a SparkSession whose catalog lives in {actual}, not {wanted}; "
                    f"Spark cannot move it, so that one is used")
