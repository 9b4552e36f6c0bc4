"""Every merge engine through the Spark upsert: randomised batches with moves, several assigners and
small buckets, against the independent model; read back by the `paimon` source and pypaimon.

Each engine runs on both stores and in both executions, in pairs that together cover every pair of
(store, execution, engine) values: the 8 runs of a pairwise design instead of the 16 of the full
product (what an engine does to rows does not depend on the store and the execution together; the
store and the execution meet in every combination, and the suite's other upsert tests cover them)."""

import pytest

from dbt_paimon.engine import RunSettings, upsert
from dbt_paimon.store.table import FileStoreTable

from ..engine.helpers import frame, live_places, pypaimon_rows, spark_rows
from ..engine.model import UpsertModel, random_batches

BASE = {"dynamic-bucket.target-row-num": "4", "dynamic-bucket.assigner-parallelism": "3"}
AGGREGATES = {"v": "sum", "amount": "max", "s": "min", "flag": "bool_or", "seq": "count"}
AGGREGATES_2 = {"v": "last_value", "amount": "min", "s": "last_non_null_value", "flag": "bool_and",
                "seq": "first_non_null_value"}

ENGINES = {
    "partial-update": ({"merge-engine": "partial-update"}, {}),
    "aggregation": ({"merge-engine": "aggregation",
                     **{f"fields.{c}.aggregate-function": f for c, f in AGGREGATES.items()}}, AGGREGATES),
    "aggregation-2": ({"merge-engine": "aggregation",
                       **{f"fields.{c}.aggregate-function": f for c, f in AGGREGATES_2.items()}}, AGGREGATES_2),
    "first-row": ({"merge-engine": "first-row"}, {}),
}


# (store, execution, engine): each engine on both stores and in both executions
PAIRWISE = [("local", "local", "partial-update"), ("s3", "distributed", "partial-update"),
            ("local", "distributed", "aggregation"), ("s3", "local", "aggregation"),
            ("local", "local", "aggregation-2"), ("s3", "distributed", "aggregation-2"),
            ("local", "distributed", "first-row"), ("s3", "local", "first-row")]


@pytest.mark.parametrize("store_warehouse, execution, name", PAIRWISE, indirect=["store_warehouse", "execution"])
def test_merge_engine_random_batches(spark, store_warehouse, name, execution):
    options, aggregates = ENGINES[name]
    engine = options["merge-engine"]
    path = f"{store_warehouse}/db.db/{name.replace('-', '_')}"
    model = UpsertModel(["id"], ["dt"], engine=engine, aggregates=aggregates)
    for i, batch in enumerate(random_batches(seed=20 + len(name), batches=4, size=30, key_space=45)):
        expected = model.apply(batch)
        result = upsert(frame(spark, batch), path, primary_keys="id", partition_keys="dt",
                        options={**BASE, **options}, settings=RunSettings(execution=execution))
        got = {k: getattr(result, k) for k in expected}
        assert got == expected, f"batch {i}"
        places = live_places(path)
        assert all(n == 1 for n in places.values()) and len(places) == len(model.rows)
        assert spark_rows(spark, path) == model.sorted_rows(), f"batch {i}"
    table = FileStoreTable.open(path)
    if engine == "first-row":
        # every bucket was compacted out of level 0, so Paimon's own readers see the rows
        assert all(f.level > 0 for s in table.plan().splits for f in s.files)
        assert table.latest_snapshot().commit_kind == "COMPACT"
    if "count" in aggregates.values():
        assert table.schema.options["fields.seq.aggregate-function"] == "sum"
        assert table.schema.field("seq").type.root == "BIGINT"
    assert pypaimon_rows(path) == model.sorted_rows()
