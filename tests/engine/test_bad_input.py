"""Bad input: a clear error naming the problem, and nothing committed (no snapshot, no files)."""

import os

import pytest

from dbt_paimon.engine import RunSettings, delete
from dbt_paimon.engine import upsert
from dbt_paimon.store.common.errors import DataError, SchemaError
from dbt_paimon.store.table import FileStoreTable

from .helpers import frame, spark_rows

GOOD = [{"id": i, "dt": "a", "v": i, "s": "x", "amount": 1, "flag": True, "seq": i} for i in range(5)]


V_STRING = "id bigint, dt string, v string, s string, amount int, flag boolean, seq bigint"


def _files(path):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs)


@pytest.fixture(scope="module")
def base(spark, tmp_path_factory):
    """A table with one committed snapshot that every case tries to damage."""
    path = str(tmp_path_factory.mktemp("bad") / "wh" / "db.db" / "t")
    upsert(frame(spark, GOOD), path, primary_keys="id", partition_keys="dt")
    return path


def _row(**changes):
    return {**GOOD[0], **changes}


CASES = [
    ("null key", lambda spark: frame(spark, [_row(id=None)]), {}, DataError, "'id' is null"),
    ("duplicate keys", lambda spark: frame(spark, [_row(id=7), _row(id=7, v=2), _row(id=8)]), {},
     DataError, "duplicate row(s) for key(s) {'id': 7}"),
    ("sequence_by tie", lambda spark: frame(spark, [_row(id=7, seq=1), _row(id=7, v=2, seq=1)]),
     {"sequence_by": "seq"}, DataError, "same 'seq' differ"),
    ("type mismatch", lambda spark: frame(spark, [_row(v="ten")], V_STRING), {},
     SchemaError, "column 'v' is string in the batch but BIGINT in the table"),
    ("narrowing", lambda spark: spark.createDataFrame([(1, "a", 1.5, "x", 1, True, 1)],
                                                      "id bigint, dt string, v double, s string, amount int, "
                                                      "flag boolean, seq bigint"), {},
     SchemaError, "column 'v' is double"),
    ("missing column", lambda spark: frame(spark, [_row()]).drop("s"), {}, SchemaError, "missing ['s']"),
    ("unknown option", lambda spark: frame(spark, [_row()]), {"options": {"bucket-count": "3"}},
     SchemaError, "unknown table option 'bucket-count'"),
    ("changed option", lambda spark: frame(spark, [_row()]), {"options": {"merge-engine": "first-row"}},
     SchemaError, "option 'merge-engine' is not set (Paimon's default) on the existing table"),
    ("primary key disagrees", lambda spark: frame(spark, [_row()]), {"primary_keys": ["id", "s"]},
     SchemaError, "disagrees with the primary key ['id']"),
    ("partition keys disagree", lambda spark: frame(spark, [_row()]), {"partition_keys": []},
     SchemaError, "partition keys [] disagree"),
]


@pytest.mark.parametrize("name,make,kwargs,error,message", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_and_nothing_is_committed(spark, base, name, make, kwargs, error, message, execution):
    before = _files(base)
    args = {"primary_keys": "id", "partition_keys": "dt", "settings": RunSettings(execution=execution), **kwargs}
    with pytest.raises(error) as info:
        upsert(make(spark), base, **args)
    assert message in str(info.value)
    assert FileStoreTable.open(base).latest_snapshot().id == 1
    assert _files(base) == before


def test_a_failed_first_run_leaves_no_table(spark, warehouse):
    path = f"{warehouse}/db.db/never"
    with pytest.raises(DataError):
        upsert(frame(spark, [_row(id=None)]), path, primary_keys="id", partition_keys="dt")
    assert not FileStoreTable.exists(path)
    assert not os.path.exists(path) or _files(path) == []


def test_null_partition_value_goes_to_the_default_partition(spark, warehouse):
    path = f"{warehouse}/db.db/nullpart"
    upsert(frame(spark, [_row(id=1, dt=None), _row(id=2, dt="a")]), path, primary_keys="id", partition_keys="dt")
    assert os.path.isdir(f"{path}/dt=__DEFAULT_PARTITION__")
    assert [(r["id"], r["dt"]) for r in spark_rows(spark, path)] == [(1, None), (2, "a")]
    # and a key can move out of it
    upsert(frame(spark, [_row(id=1, dt="b")]), path, primary_keys="id", partition_keys="dt")
    assert [(r["id"], r["dt"]) for r in spark_rows(spark, path)] == [(1, "b"), (2, "a")]


def test_a_delete_predicate_naming_no_column_is_refused_naming_only_the_tables_columns(spark, base):
    """Spark's suggestion of the columns meant lists the table's, not the engine's own (the rows' bucket)."""
    before = _files(base)
    with pytest.raises(SchemaError, match=r"delete predicate 'bucket = 1' is not valid Spark SQL") as info:
        delete(spark, base, "bucket = 1")
    assert "`id`" in str(info.value) and "__bucket" not in str(info.value)
    assert FileStoreTable.open(base).latest_snapshot().id == 1
    assert _files(base) == before
