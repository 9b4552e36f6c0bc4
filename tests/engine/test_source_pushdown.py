"""Spark's filters narrow what the `paimon` source reads (engine/pushdown.py): comparisons on
partition fields skip other partitions, on the key's first field the files whose key range holds no
passing value; every answer stays the model's. That a split or file was not read is shown by
deleting it: a read that needed it would fail."""

from __future__ import annotations

import os

import pytest

from dbt_paimon.engine import RunSettings, upsert
from dbt_paimon.store import FileStoreTable

SCHEMA = "id bigint, dt string, v string"


def _upsert(spark, path, batch, **kwargs):
    upsert(spark.createDataFrame(batch, SCHEMA), path, settings=RunSettings(execution="local"), **kwargs)


def _read(spark, path, where: str) -> list[tuple]:
    df = spark.read.format("paimon").load(path).where(where)
    return sorted((r["id"], r["dt"], r["v"]) for r in df.collect())


def _merged(spark, warehouse, engine: str):
    """A partitioned fixed-bucket table with updates (and, deduplicate, deletes) in level-0 files
    over its first write: (path, model {(dt, id): v})."""
    from dbt_paimon.engine import delete
    path = f"{warehouse}/db.db/pushdown_{engine}"
    model = {}
    opts = {"bucket": "1", "write-only": "true", "merge-engine": engine}
    batches = [[(k, d, f"{d}{k}") for k in range(0, 40) for d in ("a", "b", "c")],
               [(k, "b", f"b{k}'") for k in range(10, 20)],
               [(k, "b", None) for k in range(15, 25)],  # partial-update: a null keeps the value
               [(k, "c", f"c{k}''") for k in range(30, 45)]]
    for batch in batches:
        _upsert(spark, path, batch, primary_keys=["dt", "id"], partition_keys="dt", options=opts)
        for k, d, v in batch:
            if v is not None or (d, k) not in model or engine != "partial-update":
                model[(d, k)] = v
    if engine == "deduplicate":
        delete(spark, path, "id IN (5, 33)")
        model = {(d, k): v for (d, k), v in model.items() if k not in (5, 33)}
    return path, model


@pytest.fixture(scope="module")
def merged(spark, tmp_path_factory):
    """One table per merge engine for the module's filtered reads (they only read)."""
    built = {}

    def table(engine: str):
        if engine not in built:
            warehouse = tmp_path_factory.mktemp("pushdown")
            os.makedirs(warehouse / "db.db")
            built[engine] = _merged(spark, str(warehouse), engine)
        return built[engine]
    return table


@pytest.mark.parametrize("where, keep", [
    ("dt = 'b'", lambda d, k: d == "b"),
    ("dt IN ('a', 'c') AND id >= 32", lambda d, k: d in ("a", "c") and k >= 32),
    ("dt > 'a' AND id IN (5, 12, 17, 31, 33, 44)", lambda d, k: d > "a" and k in (5, 12, 17, 31, 33, 44)),
    ("id < 12 OR id = 41", lambda d, k: k < 12 or k == 41),
    ("id <= 16 AND id > 14", lambda d, k: 14 < k <= 16),
    ("dt IS NULL", lambda d, k: False),
    ("dt >= 'b' AND dt < 'c' AND id = 20", lambda d, k: d == "b" and k == 20),
    ("v IS NULL AND id > 20", lambda d, k: k > 20),
])
@pytest.mark.parametrize("engine", ["deduplicate", "partial-update"])
def test_filtered_reads_answer_as_the_model(spark, merged, engine, where, keep):
    path, model = merged(engine)
    want = sorted((k, d, v) for (d, k), v in model.items() if keep(d, k))
    if where.startswith("v IS NULL"):
        want = [r for r in want if r[2] is None]
    assert _read(spark, path, where) == want


def test_pruned_partitions_and_files_are_not_read(spark, warehouse):
    path, _ = _merged(spark, warehouse, "deduplicate")
    table = FileStoreTable.open(path)
    splits = {s.partition_values[0]: s for s in table.plan(batch_read=True).splits}
    assert len(splits["c"].files) == 3  # the base [0, 39], the last batch [30, 44], the deletes [5, 33]
    gone = [f for f in splits["c"].files if f.min_sequence_number == 0]  # the base file of partition c
    os.remove(f"{splits['c'].bucket_path}/{gone[0].file_name}")
    os.remove(f"{splits['a'].bucket_path}/{splits['a'].files[0].file_name}")
    assert _read(spark, path, "dt = 'b' AND id = 3") == [(3, "b", "b3")]  # a and c pruned
    assert _read(spark, path, "dt = 'c' AND id >= 40") == [(k, "c", f"c{k}''") for k in range(40, 45)]
    with pytest.raises(Exception, match="data file .* is missing"):
        _read(spark, path, "dt = 'c' AND id = 35")  # needs the base file: it held key 35 first


def test_each_ordered_type_is_narrowed_as_spark_compares_it(spark, warehouse):
    """Dates, decimals, booleans, small integers and strings (UTF-8 order), nulls among them: every
    filter's answer is what Spark gives over the rows read without one."""
    import datetime as dt
    from decimal import Decimal
    path = f"{warehouse}/db.db/typed"
    rows = [(i, dt.date(2024, 1, 1 + i % 5), Decimal(f"{i}.{i % 3}5") if i % 7 else None, bool(i % 2) if i % 4 else None,
             i % 3, ["a", "b", "é", "ß", "Z", None][i % 6]) for i in range(30)]
    df = spark.createDataFrame(rows, "id int, d date, amt decimal(10,2), flag boolean, small tinyint, name string")
    upsert(df, path, primary_keys="id", partition_keys="d", options={"bucket": "2"},
           settings=RunSettings(execution="local"))
    everything = spark.read.format("paimon").load(path)
    everything.cache().count()  # the unfiltered answer, read once (cached: no filter reaches our source)
    for where in ("d = DATE'2024-01-03'", "d > DATE'2024-01-03'", "amt >= 12.05", "amt < 3.15", "amt IS NULL",
                  "flag = true", "flag IS NULL", "small IN (0, 2)", "name = 'é'", "name > 'b'", "name < 'b'",
                  "name IS NOT NULL AND id <= 7", "id IN (3, 4, 29) AND d <= DATE'2024-01-04'"):
        got = sorted(tuple(r) for r in spark.read.format("paimon").load(path).where(where).collect())
        want = sorted(tuple(r) for r in everything.where(where).collect())
        assert got == want and want, where
    everything.unpersist()


def test_an_aggregation_table_merges_every_version_of_the_keys_it_reads(spark, warehouse):
    """Key-range pruning is not used on aggregation tables: a kept file's other keys would be summed
    without their versions in the pruned files, which can overflow where the whole sum does not."""
    path = f"{warehouse}/db.db/summed"
    opts = {"bucket": "1", "write-only": "true", "merge-engine": "aggregation",
            "fields.n.aggregate-function": "sum"}
    big = 2_000_000_000
    for batch in ([(1, 0), (9, big)], [(9, -big)], [(1, 0), (9, big)]):  # key 9's sum stays in INT
        upsert(spark.createDataFrame(batch, "id bigint, n int"), path, primary_keys="id", options=opts,
               settings=RunSettings(execution="local"))
    assert len(FileStoreTable.open(path).plan().splits[0].files) == 3
    got = spark.read.format("paimon").load(path).where("id = 1").collect()
    assert [tuple(r) for r in got] == [(1, 0)]
    assert [tuple(r) for r in spark.read.format("paimon").load(path).where("id = 9").collect()] == [(9, big)]
