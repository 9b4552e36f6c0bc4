"""PaimonConnectionManager: dbt-spark's in-process `session` connection under `type: paimon`."""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any, Generator

from dbt.adapters.contracts.connection import AdapterResponse, Connection, ConnectionState
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.exceptions import FailedToConnectError
from dbt.adapters.spark.connections import SparkConnectionManager
from dbt.adapters.spark.session import Connection as SessionConnection
from dbt.adapters.spark.session import SessionConnectionWrapper
from dbt_common.exceptions import DbtRuntimeError

from ..store.errors import PaimonError
from .credentials import PaimonCredentials
from .session import spark_for

log = AdapterLogger("Paimon")


_OUR_ERROR = re.compile(r"dbt_paimon\.store\.errors\.(?:[A-Za-z]+Error): (.+)")
_PYTHON_ERROR = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$", re.MULTILINE)


def error_message(exc: BaseException) -> str:
    """The part of a Spark/Py4J error a dbt user needs: the message, not the JVM or Python stack.
    An error of ours raised inside a Spark task or data source comes back as its own words."""
    text = str(exc)
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
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


class PaimonConnectionManager(SparkConnectionManager):
    TYPE = "paimon"

    def __init__(self, profile: Any, mp_context: Any) -> None:
        super().__init__(profile, mp_context)
        credentials = getattr(profile, "credentials", None)
        if isinstance(credentials, PaimonCredentials):
            # relative warehouse paths belong to the dbt project, not to wherever dbt was started
            credentials.resolve_paths(getattr(profile, "project_root", None))

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        if connection.state == ConnectionState.OPEN:
            return connection
        creds: PaimonCredentials = connection.credentials
        try:
            spark_for(creds)
        except Exception as e:  # noqa: BLE001 - any failure to start Spark is a failure to connect
            connection.state = ConnectionState.FAIL
            raise FailedToConnectError(f"dbt-paimon could not start Spark: {error_message(e)}") from e
        connection.handle = SessionConnectionWrapper(
            SessionConnection(server_side_parameters=creds.statement_settings()))
        connection.state = ConnectionState.OPEN
        return connection

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
