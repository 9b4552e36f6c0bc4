"""Spark beside the bench: a venv per Spark line, the table formats' jars, a client of spark_runner.py.

The formats a dbt-on-Spark user weighs Paimon against are JVM connectors built for one Spark line
each, and the bench venv's pyspark (constraints.txt's) is newer than any of them. So each line gets a
venv of its own under bench/.work/spark-<line>/ with its exact pyspark, and dbt-paimon installed
editable (`-e <repo>`, constraints.txt's pins where they allow that pyspark): dbt-paimon's reader is
measured on the same Spark as each peer. Built once; a stamp names what it was built from.

The jars are pinned (coordinates and sha256) and fetched with `mvn dependency:get` by
tests/java_paimon/fetch_jar.py into the git-ignored .work/java-paimon/, not through
spark.jars.packages: Ivy's resolution at session start once failed on a transitive jar whose pom was
cached and jar not (io.airlift:aircompressor), and the few jars a MERGE needs are known.

    python bench/spark_side.py            # builds both venvs and fetches every jar (bench.sh runs it)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tests.java_paimon.fetch_jar import fetch_jar  # noqa: E402
from tests.java_paimon.reference import SPARK_CONNECTOR_2, Artifact  # noqa: E402
from tests.json_lines import ask  # noqa: E402

RUNNER = os.path.join(HERE, "spark_runner.py")
INTERPRETER = "python3.11"   # every pyspark line here supports it; the bench venv's own Python

# Delta 4.2 on Spark 4.1: delta-spark and delta-storage are all its MERGE, OPTIMIZE and deletion
# vectors load (its pom's delta-kernel-* and unitycatalog-client serve Unity Catalog tables only).
DELTA_SPARK = Artifact("io.delta", "delta-spark_2.13", "4.2.0",
                       "8480050a55c7e50427f3bec3af9243f98fc7cbfa453a2ef55e6ea8d0b7b121ff")
DELTA_STORAGE = Artifact("io.delta", "delta-storage", "4.2.0",
                         "2d84df76551f2b3cd27b120abec67ccbba324cea6ec45eb659edcc54234f99f3")
# Iceberg's Spark runtime is one shaded jar.
ICEBERG = Artifact("org.apache.iceberg", "iceberg-spark-runtime-4.1_2.13", "1.11.0",
                   "d6ea6c5d099288daeb7d5a92061bd3d7d8f296492632b42378e5f2f0e3066242")
# Paimon 2.0.0's own connector for Spark 4.0 (tests/java_paimon/reference.py pins it and says where it
# comes from when Maven refuses it).
PAIMON_SPARK_2 = SPARK_CONNECTOR_2


@dataclass(frozen=True)
class SparkLine:
    """One Spark version with its venv: the pyspark pinned, the jars its formats need."""
    name: str
    pyspark: str
    jars: tuple = field(default=())

    @property
    def venv(self) -> str:
        return os.path.join(HERE, ".work", f"spark-{self.name}", "venv")


LINES = {"4.1": SparkLine("4.1", "4.1.1", (DELTA_SPARK, DELTA_STORAGE, ICEBERG)),
         "4.0": SparkLine("4.0", "4.0.1", (PAIMON_SPARK_2,))}


def jar(artifact: Artifact) -> str:
    """The artifact's jar: through Maven first, else (only for a jar shared/jars/ holds) that file."""
    return fetch_jar(artifact, shared=True)


def _stamp(line: SparkLine) -> str:
    digest = hashlib.sha1(line.pyspark.encode())
    for name in ("pyproject.toml", "setup.py", "constraints.txt"):
        with open(os.path.join(ROOT, name), "rb") as f:
            digest.update(f.read())
    return os.path.join(line.venv, f".installed-{digest.hexdigest()[:12]}")


def ensure_venv(line: SparkLine) -> str:
    """The line's venv Python with its pyspark and dbt-paimon (editable) installed, built once."""
    python = os.path.join(line.venv, "bin", "python")
    stamp = _stamp(line)
    if os.path.exists(stamp):
        return python
    interpreter = shutil.which(INTERPRETER)
    if interpreter is None:
        raise RuntimeError(f"the Spark {line.name} side venv needs `{INTERPRETER}` on PATH")
    shutil.rmtree(line.venv, ignore_errors=True)
    os.makedirs(line.venv)
    # constraints.txt pins the suite's pyspark; every other pin holds here too
    constraints = os.path.join(line.venv, "constraints.txt")
    with open(os.path.join(ROOT, "constraints.txt")) as src, open(constraints, "w") as out:
        out.writelines(x for x in src if not x.lower().startswith("pyspark=="))
    uv = os.path.join(os.path.dirname(sys.executable), "uv")   # much faster than pip, where it is
    install = ([uv, "pip", "install", "-q", "--python", python] if os.access(uv, os.X_OK)
               else [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"])
    for cmd in ([interpreter, "-m", "venv", line.venv],
                install + ["-c", constraints, "-e", ROOT, f"pyspark=={line.pyspark}"]):
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    open(stamp, "w").close()
    return python


def ensure(line: SparkLine) -> tuple[str, list[str]]:
    """(venv python, jars) of a line, both made if missing."""
    return ensure_venv(line), [jar(a) for a in line.jars]


class SideSpark:
    """One long-lived spark_runner.py in a line's venv: one SparkSession (one JVM) for every request.
    A request is a dict (see spark_runner.py); the answer a dict, `error` raised as SparkSideError."""

    def __init__(self, line: SparkLine, conf: dict, log: str, jars: list[str] | None = None):
        """jars: the line's (None) or these, e.g. none for a session of dbt-paimon's reader alone."""
        python, line_jars = ensure(line)
        jars = line_jars if jars is None else jars
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
        env["PYSPARK_PYTHON"] = python
        self.log = log
        t0 = time.perf_counter()
        with open(log, "ab") as f:   # Spark's logging to a file, never to a pipe nobody drains
            self._proc = subprocess.Popen([python, RUNNER, ",".join(jars), json.dumps(conf)],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=f, text=True,
                                          env=env, start_new_session=True)
        self.pid = self._proc.pid
        self.request(op="ping")
        self.startup_seconds = time.perf_counter() - t0   # process, JVM and session up: a user's wait

    def request(self, **req) -> dict:
        answer = ask(self._proc, req, self.log, "the Spark side runner")
        if "error" in answer:
            raise SparkSideError(answer["error"])
        return answer

    def sql(self, text: str, **kw) -> dict:
        return self.request(op="sql", sql=text, **kw)

    def close(self) -> None:
        if self._proc is None:
            return
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, 9)   # its own session: the JVM and Python workers go with it
            self._proc.wait()
        self._proc = None


class SparkSideError(Exception):
    """A statement the side Spark refused; the message is Spark's."""


if __name__ == "__main__":
    for spark_line in LINES.values():
        print(spark_line.name, *ensure(spark_line))
