"""Spark's store assignment: how a statement's value is written into a column of another type.

Spark SQL's INSERT, UPDATE and MERGE on a Paimon table assign as Spark's own statements do on its
tables (spark.sql.storeAssignmentPolicy, ANSI by default):
- a value of a type the policy does not cast to the column's is refused when the statement is
  resolved, by Spark's own rule (ANSI: Cast.canANSIStoreAssign, so no string into a number; STRICT:
  Cast.canUpCast; LEGACY: anything);
- the casts run in ANSI mode (a value that does not fit fails the statement) whatever
  spark.sql.ansi.enabled says, which dbt-spark's session turns off; under LEGACY in legacy mode (a
  null for what does not fit) whatever it says.
The statement's own expressions keep the session's mode: only the casts take the policy's, as in Spark.
"""

from __future__ import annotations

from contextlib import contextmanager

from pyspark.sql import SparkSession

from ...store.common.errors import SchemaError
from ..runtime import jobs

POLICY = "spark.sql.storeAssignmentPolicy"
_ANSI = "spark.sql.ansi.enabled"


def policy(spark: SparkSession) -> str:
    return str(spark.conf.get(POLICY, "ANSI")).upper()


def check(spark: SparkSession, words: str, column: str, given, wanted, rule: str) -> None:
    """SchemaError unless Spark's store assignment `rule` (policy()) casts a value of Spark type
    `given` into column `column` of Spark type `wanted`; `words` name the statement."""
    if given == wanted or rule == "LEGACY":
        return
    jvm = spark.sparkContext._jvm
    types = jvm.org.apache.spark.sql.types.DataType
    cast = jvm.org.apache.spark.sql.catalyst.expressions.Cast
    src, dst = types.fromJson(given.json()), types.fromJson(wanted.json())
    if not (cast.canUpCast(src, dst) if rule == "STRICT" else cast.canANSIStoreAssign(src, dst)):
        raise SchemaError(f"{words}: column {column!r} is {wanted.simpleString()} but the statement gives "
                          f"{given.simpleString()}, which Spark's store assignment ({POLICY} {rule}) does not "
                          f"cast; cast it in the statement")


@contextmanager
def casting(spark: SparkSession, rule: str):
    """Where the casts of a statement's values are made: ANSI's under ANSI, the legacy cast (a null
    for what does not parse, an overflow wrapped) under LEGACY, as Spark's store assignment makes
    them whatever spark.sql.ansi.enabled says; the session's under STRICT (up-casts, which cannot
    fail). A cast takes its mode when the DataFrame holding it is built, so the statement's own
    expressions are put in a DataFrame before this (they keep the session's mode) and only the
    select of the casts is built in here."""
    mode = {"ANSI": "true", "LEGACY": "false"}.get(rule)
    with jobs.spark_conf(spark, {_ANSI: mode} if mode else {}):
        yield
