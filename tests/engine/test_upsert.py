"""Cross-partition upserts on a real local SparkSession, checked against an independent model and
read back three ways: the `paimon` Spark source, pypaimon 2.1.0 and the model."""

from dbt_paimon.engine import RunSettings
from dbt_paimon.engine import upsert
from dbt_paimon.store.table import FileStoreTable

from .helpers import frame, live_places, pypaimon_rows, spark_rows
from .model import UpsertModel, random_batches

OPTIONS = {"dynamic-bucket.target-row-num": "4"}  # small: buckets fill and new ones open


def _run(spark, path, batches, model, options, sequence_by=None, execution="auto"):
    for i, batch in enumerate(batches):
        expected = model.apply(batch)
        result = upsert(frame(spark, batch), path, primary_keys=["id"], partition_keys=["dt"],
                        options=options, sequence_by=sequence_by, settings=RunSettings(execution=execution))
        got = {k: getattr(result, k) for k in expected}
        assert got == expected, f"batch {i}: counts {got} != model {expected}"
        assert result.snapshot_id == i + 1
        places = live_places(path)
        assert all(n == 1 for n in places.values()), [k for k, n in places.items() if n > 1][:5]
        assert len(places) == len(model.rows)
    return result


def test_deduplicate_random_batches_match_model_and_pypaimon(spark, store_warehouse, execution):
    path = f"{store_warehouse}/db.db/dedup"
    model = UpsertModel(["id"], ["dt"])
    batches = random_batches(seed=1, batches=4, size=40, key_space=70, with_null_partition=True)
    _run(spark, path, batches, model, {**OPTIONS, "dynamic-bucket.assigner-parallelism": "3"},
         execution=execution)
    expected = model.sorted_rows()
    assert spark_rows(spark, path) == expected
    assert pypaimon_rows(path) == expected
    table = FileStoreTable.open(path)
    buckets = {s.bucket for s in table.plan().splits}
    assert max(buckets) >= 3, "small target-row-num should have opened several buckets per partition"
    assert table.latest_snapshot().commit_kind == "APPEND"


def test_time_travel_reads_each_snapshot(spark, store_warehouse):
    path = f"{store_warehouse}/db.db/tt"
    model = UpsertModel(["id"], ["dt"])
    states = []
    for batch in random_batches(seed=2, batches=3, size=20, key_space=30):
        model.apply(batch)
        upsert(frame(spark, batch), path, primary_keys="id", partition_keys="dt", options=OPTIONS)
        states.append(model.sorted_rows())
    for sid, expected in enumerate(states, start=1):
        assert spark_rows(spark, path, sid) == expected
        assert pypaimon_rows(path, sid) == expected


def test_sequence_by_highest_wins_in_batch_and_older_rows_are_skipped(spark, warehouse, execution):
    path = f"{warehouse}/db.db/seq"
    model = UpsertModel(["id"], ["dt"], sequence_by="seq")
    batches = random_batches(seed=3, batches=4, size=30, key_space=40, duplicates=True)
    result = _run(spark, path, batches, model, OPTIONS, sequence_by="seq", execution=execution)
    assert spark_rows(spark, path) == model.sorted_rows()
    assert pypaimon_rows(path) == model.sorted_rows()
    assert result.skipped > 0
    # Paimon forbids sequence.field on a cross-partition table: it must not be stored as that option
    assert "sequence.field" not in FileStoreTable.open(path).schema.options


def test_assigner_parallelism_and_driver_local_execution_give_the_same_table(spark, warehouse):
    batches = random_batches(seed=4, batches=3, size=40, key_space=60)
    results = {}
    for name, parallelism, execution in (("p1", "1", "distributed"), ("p4", "4", "distributed"),
                                         ("local", "4", "local")):
        path = f"{warehouse}/db.db/{name}"
        model = UpsertModel(["id"], ["dt"])
        result = _run(spark, path, batches, model, {**OPTIONS, "dynamic-bucket.assigner-parallelism": parallelism},
                      execution=execution)
        assert result.execution == execution
        results[name] = spark_rows(spark, path)
        assert results[name] == model.sorted_rows()
    assert results["p1"] == results["p4"] == results["local"]


def test_a_wide_decimal_key_moves_partitions(spark, warehouse, execution):
    """A DECIMAL key wider than 18 digits has no Bloom hash here: every live key is bootstrapped."""
    from decimal import Decimal

    path = f"{warehouse}/db.db/wide"
    schema = "id decimal(22,0), dt string, v bigint"
    big = Decimal("1234567890123456789012")
    upsert(spark.createDataFrame([(big, "a", 1), (Decimal(7), "a", 2)], schema), path, primary_keys="id",
           partition_keys="dt", settings=RunSettings(execution=execution))
    result = upsert(spark.createDataFrame([(big, "b", 3), (Decimal(8), "b", 4)], schema), path, primary_keys="id",
                    partition_keys="dt", settings=RunSettings(execution=execution))
    assert (result.inserted, result.moved) == (1, 1)
    want = [{"id": Decimal(7), "dt": "a", "v": 2}, {"id": Decimal(8), "dt": "b", "v": 4},
            {"id": big, "dt": "b", "v": 3}]
    assert spark_rows(spark, path) == want
    assert pypaimon_rows(path) == want
