"""`dbt seed` of a seed with file_format='paimon': the CSV becomes a Paimon append table, built anew
by each `dbt seed` (beside the old one, swapped in once committed: one snapshot), its columns typed
as dbt-spark types a seed's (agate's inference through convert_type, or the seed's column_types).

The rows reach Spark as text and are cast there to each column's type, as dbt-spark's own seed
casts its bound values (`cast(? as type)`), so a CSV value reads the same whichever format holds it.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any, List, Mapping, Sequence

from dbt.adapters.base.relation import BaseRelation
from dbt_common.exceptions import DbtRuntimeError
from pyspark.sql import types as T

from .configs import quoted
from .materializations import PaimonAdapterResponse, upsert_model
from .tables import Tables


def _text(value: Any) -> Any:
    """A CSV value as the text Spark casts to the column's type (None stays null)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (dt.date, Decimal, int, float)):
        return str(value)
    return str(value)


def seed(tables: Tables, relation: BaseRelation, agate_table, column_types: Sequence[str],
         config: Mapping[str, Any]) -> PaimonAdapterResponse:
    """Write the seed's rows as the Paimon table of `relation` (replacing it whole)."""
    names: List[str] = [str(n) for n in agate_table.column_names]
    if len(column_types) != len(names):
        raise DbtRuntimeError(f"{relation}: {len(column_types)} column types for {len(names)} columns")
    spark = tables.spark()
    text = T.StructType([T.StructField(f"c{i}", T.StringType(), True) for i in range(len(names))])
    frame = spark.createDataFrame([tuple(_text(v) for v in row) for row in agate_table.rows], text)
    try:
        typed = frame.selectExpr(*[f"CAST(c{i} AS {t}) AS {quoted(n)}"
                                   for i, (n, t) in enumerate(zip(names, column_types))])
    except Exception as e:  # noqa: BLE001 - a column_types entry Spark cannot read: named as written
        raise DbtRuntimeError(f"{relation}: the seed's column types {list(column_types)} are not all Spark SQL "
                              f"types: {str(e).splitlines()[0]}") from None
    view = f"paimon_seed_{uuid.uuid4().hex}"
    typed.createOrReplaceTempView(view)
    try:
        source = relation.__class__.create(identifier=view, schema=None, database=None)
        return upsert_model(tables, relation, source, {**config, "materialized": "seed"}, full_refresh=True)
    finally:
        spark.catalog.dropTempView(view)
