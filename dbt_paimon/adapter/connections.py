"""PaimonConnectionManager: dbt-spark's in-process `session` connection under `type: paimon`.

The session cursor is dbt-spark's, with what several dbt processes on one project need around each
statement (statements.py reads which relation it writes; the records say which Spark tables it may
read): before it, the locks on those Spark relations (locks.py: exclusive to write, shared to read,
held until dbt releases the connection) and the catalog records other processes committed
(spark_relations.py); after it, the record of what it changed.
"""

from __future__ import annotations

import datetime

import re
from contextlib import contextmanager
from typing import Any, Generator, Optional

from dbt.adapters.contracts.connection import AdapterResponse, Connection, ConnectionState
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.exceptions import FailedToConnectError
from dbt.adapters.spark.connections import SparkConnectionManager
from dbt.adapters.spark.session import Connection as SessionConnection
from dbt.adapters.spark.session import Cursor as SessionCursor
from dbt.adapters.spark.session import SessionConnectionWrapper
from dbt_common.exceptions import DbtRuntimeError
from pyspark.sql import SparkSession
from pyspark.sql.utils import AnalysisException

from ..store import PaimonError
from . import statements
from .credentials import PaimonCredentials
from .locks import HeldLocks, lock_path
from .session import relation_store, spark_for, start_early, start_failure, sync_schema

log = AdapterLogger("Paimon")


_OUR_ERROR = re.compile(re.escape(PaimonError.__module__) + r"\.(?:[A-Za-z]+Error): (.+)")
_WRAPPED = "Exception thrown in awaitResult"
_PYTHON_ERROR = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$", re.MULTILINE)


def error_message(exc: BaseException) -> str:
    """The part of a Spark/Py4J error a dbt user needs: the message, not the JVM or Python stack.
    An error of ours raised inside a Spark task or data source comes back as its own words."""
    text = str(exc)
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            # a job's failure reaches the driver wrapped ("Exception thrown in awaitResult: "): its cause says why
            seen = 0
            while (str(java.getMessage() or "").startswith(_WRAPPED) and java.getCause() is not None
                   and seen < 20):
                java, seen = java.getCause(), seen + 1
            text = str(java.getMessage()) or str(java.toString())
        except Exception:  # noqa: BLE001 - the gateway may be gone; keep the text we have
            pass
    ours = _OUR_ERROR.search(text)
    if ours:
        return ours.group(1).strip()
    text = text.split("\n\tat ", 1)[0].strip()
    if "Traceback (most recent call last)" in text:
        last = _PYTHON_ERROR.findall(text)
        if last:
            name, message = last[-1]
            head = text.split("\n", 1)[0].strip()
            return f"{head} {name.rsplit('.', 1)[-1]}: {message.strip()}"
    return text


def hold_relations(spark: SparkSession, credentials: PaimonCredentials, held: HeldLocks, sql: str,
                   writes: set, reads: bool = True) -> None:
    """Take the locks a statement needs on Spark's own relations (locks.py), kept by `held` until dbt
    releases the connection: exclusive on those it writes, shared on those it may read. Every SQL
    this process runs for a node goes through here, the model queries dbt-paimon runs itself too."""
    store = relation_store(spark)
    if store is None:
        return
    store.refresh(spark)  # tables another process created since: their names may be read here
    read = store.tables_read(sql) - writes if reads else set()
    for (schema, name), exclusive in sorted([(w, True) for w in writes] + [(r, False) for r in read]):
        held.acquire(lock_path(store.lock_root(), schema, name), f"{schema}.{name}", exclusive,
                     credentials.lock_timeout, log.info)
    store.refresh(spark)  # what a writer we waited for committed


class PaimonCursor(SessionCursor):
    """dbt-spark's session cursor on this process's session, keeping Spark's own relations shared."""

    def __init__(self, spark: SparkSession, credentials: PaimonCredentials, held: HeldLocks) -> None:
        super().__init__(server_side_parameters=credentials.statement_settings())
        self._spark = spark
        self._credentials = credentials
        self._held = held

    def execute(self, sql: str, *parameters: Any) -> None:
        if len(parameters) > 0:
            sql = sql % parameters
        spark = self._spark
        store = relation_store(spark)
        statement: Optional[statements.Statement] = None
        if store is not None:
            statement = statements.parse(sql, lambda: spark.catalog.currentDatabase())
            if statement.bare_names and _is_temp_view(spark, statement.bare_names[0]):
                statement = statements.Statement()  # a session's temporary view: nothing to share
            hold_relations(spark, self._credentials, self._held, sql, set(statement.relations),
                           reads=not statements.is_metadata(sql))
            if statement.listed_schema:
                sync_schema(spark, self._credentials, statement.listed_schema)
        ran = False
        try:
            # the session's runtime settings were applied when the connection opened (dbt-spark
            # sends them again with every statement through SparkSession.builder, which makes
            # Spark log a warning each time)
            self._df = spark.sql(sql)
            ran = True
        except AnalysisException as exc:
            raise DbtRuntimeError(str(exc)) from exc
        finally:
            # recorded even when the statement failed: the record follows whatever the catalog holds now
            if store is not None and statement is not None and (
                    statement.writes or statement.schema_change or statement.unknown):
                try:
                    store.written(spark, statement)
                except Exception as e:  # noqa: BLE001 - raised when the statement ran; after a failed one, a debug line
                    if ran:
                        raise
                    log.debug(f"recording the catalog after a failed statement: {e}")


def _is_temp_view(spark: SparkSession, name: str) -> bool:
    return bool(spark._jsparkSession.sessionState().catalog().getTempView(name).isDefined())


class PaimonSessionConnection(SessionConnection):
    def __init__(self, spark: SparkSession, credentials: PaimonCredentials, held: HeldLocks) -> None:
        super().__init__(server_side_parameters=credentials.statement_settings())
        self._spark, self._credentials, self._held = spark, credentials, held

    def cursor(self) -> PaimonCursor:
        return PaimonCursor(self._spark, self._credentials, self._held)

    def hold_reads(self, sql: str) -> None:
        """Shared locks on the Spark tables a query dbt-paimon runs itself (a model's or a snapshot's
        SELECT, read through spark.sql outside the cursor) may read, held with the connection's."""
        hold_relations(self._spark, self._credentials, self._held, sql, set())


class PaimonConnectionWrapper(SessionConnectionWrapper):
    """dbt-spark's session connection; closing it (dbt releases a connection after each node)
    releases the relation locks its statements took."""

    def __init__(self, handle: PaimonSessionConnection, held: HeldLocks) -> None:
        super().__init__(handle)
        self._held = held

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._held.release_all()

    @classmethod
    def _fix_binding(cls, value: Any) -> Any:
        """A seed's value as a Spark SQL literal. dbt-spark quotes strings without escaping them, so
        a value holding a quote (`'69.135.206.194'`) broke the seed's INSERT with a parse error (and
        could have become SQL); a backslash and a quote are escaped, as Spark's literals read them."""
        fixed = super()._fix_binding(value)
        if isinstance(fixed, str) and not isinstance(value, datetime.datetime):
            text = str(value).replace("\\", "\\\\").replace("'", "\\'")
            return f"'{text}'"
        return fixed


class PaimonConnectionManager(SparkConnectionManager):
    TYPE = "paimon"

    def __init__(self, profile: Any, mp_context: Any) -> None:
        super().__init__(profile, mp_context)
        credentials = getattr(profile, "credentials", None)
        if isinstance(credentials, PaimonCredentials):
            # relative warehouse paths belong to the dbt project, not to wherever dbt was started
            credentials.resolve_paths(getattr(profile, "project_root", None))
            start_early(credentials)

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        if connection.state == ConnectionState.OPEN:
            return connection
        creds: PaimonCredentials = connection.credentials
        try:
            spark = spark_for(creds)
        except Exception as e:  # noqa: BLE001 - any failure to start Spark is a failure to connect
            connection.state = ConnectionState.FAIL
            # one paragraph, the root cause; the trace is in Spark's log file (session.start_failure)
            raise FailedToConnectError(f"dbt-paimon could not start Spark: {start_failure(e, creds)}") from None
        for key, value in creds.statement_settings().items():
            # A setting Spark fixes when it starts (spark.cores.max, ...) was given to it then
            # (credentials.spark_settings); setting it again is refused, and dbt-spark's cursor,
            # which re-applied it through the builder, only logged a warning.
            try:
                spark.conf.set(key, value)
            except Exception as e:  # noqa: BLE001 - Spark's CANNOT_MODIFY_CONFIG
                log.debug(f"{key} is fixed when Spark starts; the session keeps its value ({str(e).splitlines()[0]})")
        held = HeldLocks()
        connection.handle = PaimonConnectionWrapper(PaimonSessionConnection(spark, creds, held), held)
        connection.state = ConnectionState.OPEN
        return connection

    def hold_reads(self, sql: str) -> None:
        """The shared locks on what `sql` reads, for the node this thread runs (see hold_relations)."""
        wrapper = self.get_thread_connection().handle  # opens a lazily opened connection
        if isinstance(wrapper, PaimonConnectionWrapper) and isinstance(wrapper.handle, PaimonSessionConnection):
            wrapper.handle.hold_reads(sql)

    @contextmanager
    def exception_handler(self, sql: str) -> Generator[None, None, None]:
        try:
            yield
        except DbtRuntimeError:
            raise
        except PaimonError as e:
            raise DbtRuntimeError(str(e)) from e
        except Exception as e:  # noqa: BLE001 - as dbt-spark: every error becomes a dbt runtime error
            log.debug("Error while running:\n{}".format(sql))
            log.debug(str(e))
            raise DbtRuntimeError(error_message(e)) from e

    @classmethod
    def get_response(cls, cursor: Any) -> AdapterResponse:
        return AdapterResponse(_message="OK")
