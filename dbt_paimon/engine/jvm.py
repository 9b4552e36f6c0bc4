"""Spark's JVM objects from Python at the fewest round trips: every py4j call is one, and the SQL
layer makes many per statement (a plan's walk, a catalog's lookups).

`spark._jvm.a.b.C` resolves a name one segment at a time, each a round trip in which the JVM looks
for a class `a`, then `a.b`, ... across Spark's ~250 jars: ~2 ms for a class five packages deep,
paid at every use. `jvm_class` names the class whole instead: no round trip until it is called.
"""

from __future__ import annotations

from py4j.java_gateway import JavaClass
from pyspark.sql import SparkSession

# Scala's collection converters (scala_map, engine/qualified.py)
CONVERTERS = "scala.jdk.javaapi.CollectionConverters"
# Spark 4's classic Dataset (Dataset.ofRows: a DataFrame of a logical plan)
DATASET = "org.apache.spark.sql.classic.Dataset"


def jvm_class(spark: SparkSession, name: str) -> JavaClass:
    """The JVM class (or Scala object, through its static forwarders) of this full name, for static
    calls and constructors. Made afresh per use: a py4j proxy, tied to the session's gateway."""
    return JavaClass(name, spark._jvm._gateway_client)


def scala_list(seq) -> list:
    """A Scala Seq from Spark's API as a Python list. Taken by index, not iterated: py4j ends an
    iteration by a Java exception, and pyspark's handler of Java exceptions costs ~17 ms, which made
    the plan walk of sql/query.py ~0.6 s of every query dbt sends. `length` then `apply(i)`: 1 + n
    calls, no converter."""
    return [seq.apply(i) for i in range(seq.length())]


def scala_map(spark: SparkSession, mapping) -> dict:
    """A Scala Map as a Python dict (java_dict)."""
    return java_dict(jvm_class(spark, CONVERTERS).asJava(mapping))


def java_dict(mapping) -> dict:
    """A java.util.Map as a Python dict (keys as strings, values as py4j gives them), taken by
    index (as scala_list says why)."""
    if mapping.isEmpty():
        return {}
    keys = mapping.keySet().toArray()
    return {str(keys[i]): mapping.get(keys[i]) for i in range(len(keys))}
