"""not_null columns (dbt's not_null constraints, issue 13): NOT NULL in a new table's Paimon schema,
and checked before anything is written, on both executors, whether the run or the table says so."""

import pytest

from dbt_paimon.engine import RunSettings
from dbt_paimon.engine import upsert
from dbt_paimon.store import DataError
from dbt_paimon.store.table import FileStoreTable

from .helpers import frame, pypaimon_rows

SCHEMA = "id bigint, dt string, name string, v bigint"


def _rows(*rows):
    return [dict(zip(("id", "dt", "name", "v"), r)) for r in rows]


def test_not_null_columns_are_declared_and_enforced(spark, warehouse, execution):
    path = f"{warehouse}/db.db/nn_{execution}"
    upsert(frame(spark, _rows((1, "a", "ann", 1), (2, "b", "bob", 2)), SCHEMA), path, primary_keys="id",
           partition_keys="dt", not_null=["NAME"], settings=RunSettings(execution=execution))
    table = FileStoreTable.open(path)
    assert table.schema.field("name").type.sql() == "STRING NOT NULL"
    assert table.schema.field("v").type.nullable
    with pytest.raises(DataError, match="column 'name' is NOT NULL .* null in 1 input row"):
        upsert(frame(spark, _rows((3, "a", None, 3)), SCHEMA), path, primary_keys="id", partition_keys="dt",
               settings=RunSettings(execution=execution))  # the table's schema says so, whatever the run says
    with pytest.raises(DataError, match="column 'v' is NOT NULL .* null in [12] input row"):
        upsert(frame(spark, _rows((3, "a", "cid", None), (4, "a", "dee", None)), SCHEMA), path, primary_keys="id",
               partition_keys="dt", not_null=["v"], settings=RunSettings(execution=execution))  # the run says so
    assert table.latest_snapshot().id == FileStoreTable.open(path).latest_snapshot().id
    assert [(r["id"], r["name"]) for r in pypaimon_rows(path)] == [(1, "ann"), (2, "bob")]


def test_a_not_null_column_must_be_a_column(spark, warehouse):
    from dbt_paimon.store import SchemaError
    with pytest.raises(SchemaError, match="not_null column"):
        upsert(frame(spark, _rows((1, "a", "ann", 1)), SCHEMA), f"{warehouse}/db.db/nn_bad", primary_keys="id",
               not_null=["nope"])
    assert not FileStoreTable.exists(f"{warehouse}/db.db/nn_bad")
