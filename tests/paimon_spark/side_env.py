"""Paimon's Spark connectors beside the suite: their side environments, and a client of their runner.

Two releases of the connector hold our tables on Spark (`LINES`): 0.9.0 on Spark 3.5, the newest Maven
Central serves here, and 2.0.0 on Spark 4.0, the current one (reference.py says where its jar comes
from). Each is built for a pyspark other than ours, so each runs in a venv of its own under `.work/`,
with its jar fetched through Maven (`tests/java_paimon/fetch_jar.py`). `python
tests/paimon_spark/side_env.py` builds them (once; `bash run.sh test` calls it) and prints the venvs'
Pythons. `PaimonSpark` runs `runner.py` in a line's venv: one JVM per line for the whole test session,
SQL in, rows out.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

import pytest

if __package__ in (None, ""):  # run as a script by run.sh
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tests.java_paimon.fetch_jar import fetch_jar  # noqa: E402
from tests.java_paimon.reference import (SPARK_CONNECTOR, SPARK_CONNECTOR_2, SPARK_CONNECTOR_2_PYSPARK,  # noqa: E402
                                         SPARK_CONNECTOR_PYSPARK, Artifact)
from tests.json_lines import ask  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner.py")
INTERPRETER = "python3.11"  # pyspark 3.5 supports Python up to 3.11, 4.0 from 3.9


@dataclass(frozen=True)
class Line:
    """One release of Paimon's Spark connector and the pyspark it is built for."""

    name: str
    connector: Artifact
    pyspark: str
    venv: str

    @property
    def jars(self) -> list[str]:
        """The connector's jar (Maven first, shared/jars/ second). Not its S3 file system (paimon-s3
        0.9.0, Hadoop's S3A over the AWS SDK v1): the S3 test server refuses its signed requests
        (403), so the connector reads tables on the local disk only."""
        return [fetch_jar(self.connector, shared=True)]


LINES = {
    "0.9": Line("0.9", SPARK_CONNECTOR, SPARK_CONNECTOR_PYSPARK, os.path.join(ROOT, ".work", "paimon-spark", "venv")),
    "2.0": Line("2.0", SPARK_CONNECTOR_2, SPARK_CONNECTOR_2_PYSPARK,
                os.path.join(ROOT, ".work", "paimon-spark-2.0", "venv")),
}


def release_id(line: str) -> str:
    """A test's id part for a release of the connector (tests/schedule.py groups by it)."""
    return f"paimon-spark-{line}"


# a test that needs the current release: the `paimon_spark` fixture given 2.0 alone
CURRENT_RELEASE_ONLY = pytest.mark.parametrize("paimon_spark", ["2.0"], indirect=True, ids=release_id)


class SparkSqlError(Exception):
    """A statement Paimon's Spark connector refused; the message is Spark's."""


def ensure_venv(line: Line = LINES["0.9"]) -> str:
    """The line's venv Python, with its pyspark installed (once: a stamp file says so). A lock makes a
    second caller wait for the first one's build (`bash run.sh test` starts the builds beside the tests)."""
    python = os.path.join(line.venv, "bin", "python")
    stamp = os.path.join(line.venv, f".installed-pyspark-{line.pyspark}")
    if os.path.exists(stamp):
        return python
    os.makedirs(os.path.dirname(line.venv), exist_ok=True)
    with open(line.venv + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        if not os.path.exists(stamp):
            _build(line, stamp)
    return python


def _build(line: Line, stamp: str) -> None:
    python = os.path.join(line.venv, "bin", "python")
    interpreter = shutil.which(INTERPRETER)
    if interpreter is None:
        raise RuntimeError(f"Paimon's Spark connector {line.name} runs on pyspark {line.pyspark}, which needs "
                           f"`{INTERPRETER}` on PATH")
    shutil.rmtree(line.venv, ignore_errors=True)
    # uv, when the project's venv has it (run.sh installs it), builds pyspark's sdist in a fraction
    # of pip's time; pip otherwise
    uv = os.path.join(os.path.dirname(sys.executable), "uv")
    install = ([uv, "pip", "install", "-q", "--python", python] if os.access(uv, os.X_OK)
               else [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"])
    for cmd in ([interpreter, "-m", "venv", line.venv], install + [f"pyspark=={line.pyspark}"]):
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    open(stamp, "w").close()


class PaimonSpark:
    """Spark SQL through one release of Paimon's connector, in one long-lived process (a Spark start
    costs ~10 s)."""

    def __init__(self, log: str, settings: dict | None = None, line: str = "0.9"):
        self.line = LINES[line]
        self.python, self.jars = ensure_venv(self.line), self.line.jars
        self.log, self.settings = log, dict(settings or {})
        self._proc: subprocess.Popen | None = None

    def sql(self, warehouse: str, text: str, catalog: str | None = None, options: dict | None = None) -> list[dict]:
        """The statement's rows as dicts, in Spark's order; `warehouse` is the catalog's root (a Paimon
        `SparkCatalog` named `catalog`, by default one name per warehouse; `options`: the catalog's, such as
        an object store's settings). Raises SparkSqlError."""
        answer = self.request(warehouse, text, catalog, options=options)
        return [dict(zip(answer["columns"], row)) for row in answer["rows"]]

    def request(self, warehouse: str, text: str, catalog: str | None = None, parquet: str | None = None,
                options: dict | None = None) -> dict:
        """The runner's answer (`columns`, `rows`, `seconds`); with `parquet`, the rows go to Parquet
        files in that directory instead."""
        if self._proc is None:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
            env["PYSPARK_PYTHON"] = self.python
            with open(self.log, "ab") as log:  # Spark's logging goes to a file, never a full pipe
                self._proc = subprocess.Popen([self.python, RUNNER, ",".join(self.jars), json.dumps(self.settings)],
                                              stdin=subprocess.PIPE,
                                              stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        catalog = catalog or "wh_" + hashlib.sha1(warehouse.encode()).hexdigest()[:12]
        request = {"catalog": catalog, "warehouse": warehouse, "sql": text, "parquet": parquet,
                   "options": options or {}}
        answer = ask(self._proc, request, self.log, "Paimon's Spark runner")
        if "error" in answer:
            raise SparkSqlError(answer["error"])
        return answer

    def close(self) -> None:
        if self._proc is not None:
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._proc = None


def table_name(path: str) -> tuple[str, str]:
    """(warehouse, `db.table`) of a table at <warehouse>/<db>.db/<table>."""
    db_dir, name = path.rstrip("/").rsplit("/", 1)
    warehouse, db = db_dir.rsplit("/", 1)
    return warehouse, f"{db.removesuffix('.db')}.{name}"


def spark_sql_rows(client: PaimonSpark, path: str, key: list[str], as_of: int | str | None = None,
                   options: dict | None = None) -> list[dict]:
    """The table's rows through Paimon's Spark SQL, sorted by key; `as_of`: a snapshot id, or a tag name
    in quotes (`VERSION AS OF`); `options`: the catalog's (an object store's settings)."""
    warehouse, name = table_name(path)
    travel = "" if as_of is None else f" VERSION AS OF {as_of}"
    return sorted(client.sql(warehouse, f"SELECT * FROM {name}{travel}", options=options),
                  key=lambda r: tuple((r[k] is None, r[k]) for k in key))


def _literal(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def sql_values(batch: list[dict], columns: list[str] | None = None) -> str:
    """Rows as the text of a Spark SQL VALUES list, in `columns`' order (default: each row's own)."""
    return ", ".join("(" + ", ".join(_literal(r[c]) for c in (columns or list(r))) + ")" for r in batch)


if __name__ == "__main__":
    for each in LINES.values():
        print(ensure_venv(each), *each.jars)
