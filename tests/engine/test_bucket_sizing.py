"""Dynamic-bucket sizing holds across runs whatever the number of assigners (issue 11, item 8).

An assigner opens a new bucket when the buckets it owns (b % assigners == its id) are full, so it
must know the live-row count of every bucket it owns, whichever assigner the keys in it hash to.
A local run (one assigner owning all), then distributed runs with 4 and 1 assigners must never push
a bucket past dynamic-bucket.target-row-num."""

from collections import Counter
from decimal import Decimal

import pytest

from dbt_paimon.engine import RunSettings
from dbt_paimon.engine import upsert
from dbt_paimon.store.table import FileStoreTable

from .helpers import frame, live_places, pypaimon_rows

TARGET = 5


def _bucket_sizes(path):
    table = FileStoreTable.open(path)
    reader = table.new_read(list(table.schema.primary_keys))
    return Counter({(split.partition_values, split.bucket): reader.read_split(split).num_rows
                    for split in table.plan().splits})


@pytest.mark.parametrize("kind", ["cross-partition", "dynamic", "cross-partition-wide-key"])
def test_no_bucket_exceeds_the_target_across_assigner_counts(spark, warehouse, kind):
    """kind: cross-partition (key without the partition), dynamic (key holds the partition: HASH
    index), and a cross-partition table whose key cannot be Bloom-filtered (every key bootstraps)."""
    path = f"{warehouse}/db.db/sizing_{kind.replace('-', '_')}"
    wide = kind == "cross-partition-wide-key"
    schema = f"id {'decimal(22)' if wide else 'bigint'}, dt string, v bigint"
    keys = ["id", "dt"] if kind == "dynamic" else ["id"]
    expected = {}
    runs = [("local", 1), ("distributed", 4), ("distributed", 1), ("distributed", 3)]
    for run, (execution, assigners) in enumerate(runs):
        # 23 new keys per run, all in partition 'a' (so buckets fill and open), plus 3 in 'b'
        ids = range(run * 100, run * 100 + 23)
        rows = [{"id": Decimal(i) if wide else i, "dt": "a", "v": run} for i in ids]
        rows += [{"id": Decimal(i + 50) if wide else i + 50, "dt": "b", "v": run} for i in ids[:3]]
        upsert(frame(spark, rows, schema), path, primary_keys=keys, partition_keys=["dt"],
               settings=RunSettings(execution=execution),
               options={"bucket": "-1", "dynamic-bucket.target-row-num": str(TARGET),
                        "dynamic-bucket.assigner-parallelism": str(assigners)})
        expected.update({(r["id"], r["dt"]): r for r in rows})
        sizes = _bucket_sizes(path)
        over = {place: n for place, n in sizes.items() if n > TARGET}
        assert not over, f"run {run} ({execution}, {assigners} assigners) overfilled buckets: {over}"
        assert sum(sizes.values()) == len(expected)
    assert all(n == 1 for n in live_places(path).values())
    got = sorted((r["id"], r["dt"], r["v"]) for r in pypaimon_rows(path))
    assert got == sorted((r["id"], r["dt"], r["v"]) for r in expected.values())
