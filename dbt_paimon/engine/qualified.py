"""A table's rows under the name a statement gives them, so its columns resolve as Spark resolves them.

Spark resolves a catalog table's column by any tail of its qualified name (`id`, `t.id`, `shop.t.id`,
`spark_catalog.shop.t.id`), and an aliased table's by the alias alone (`x.id`). `DataFrame.alias`
gives one part only; a qualified name needs Spark's own SubqueryAlias with its qualifier.
"""

from __future__ import annotations

from typing import Sequence, Union

from pyspark.sql import DataFrame

from .jvm import CONVERTERS, DATASET, jvm_class

Name = Union[str, Sequence[str]]


def named(df: DataFrame, name: Name) -> DataFrame:
    """df under `name`: an alias (one part), or a table's qualified name (its parts: catalog,
    schema, table)."""
    parts = [name] if isinstance(name, str) else list(name)
    if len(parts) == 1:
        return df.alias(parts[0])
    spark = df.sparkSession
    qualifier = jvm_class(spark, CONVERTERS).asScala(jvm_class(spark, "java.util.ArrayList")(parts[:-1])).toSeq()
    identifier = jvm_class(spark, "org.apache.spark.sql.catalyst.AliasIdentifier")(parts[-1], qualifier)
    plan = jvm_class(spark, "org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias")(identifier,
                                                                                    df._jdf.logicalPlan())
    return DataFrame(jvm_class(spark, DATASET).ofRows(spark._jsparkSession, plan), spark)

