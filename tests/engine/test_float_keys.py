"""DOUBLE primary keys through the Spark upsert: NaN and signed-zero keys move across partitions as
Paimon keys them (Double.compare: every NaN is one key, -0.0 and 0.0 are two), checked against an
independent model, our readers and pypaimon, over several batches and on both execution paths.

Spark hands -0.0 and NaN payloads to the job unchanged (createDataFrame, toArrow, repartition,
mapInArrow and union keep the bits); its hash() used for the shuffle to the assigners equates -0.0
with 0.0 and all NaNs, which only co-locates keys and never merges them.
"""

import math
import random
import struct

import numpy as np

from dbt_paimon.engine import RunSettings
from dbt_paimon.engine import upsert
from dbt_paimon.store.table import FileStoreTable
from tests.oracle import pypaimon_read

from .model import UpsertModel

SCHEMA = "k double, dt string, v bigint"
NAN = float("nan")
ODD_NAN = float(np.array([0x7FF8_0000_0000_0001], dtype=np.uint64).view(np.float64)[0])  # NaN, other bits
# full-compaction.delta-commits 1: after every commit each bucket is one file again, so pypaimon
# reads without merging (pypaimon 2.1.0's merge compares keys with Python's < and >, under which a
# NaN equals every key); our merge-on-read of several files is still checked on the APPEND snapshots.
OPTIONS = {"dynamic-bucket.target-row-num": "3", "dynamic-bucket.assigner-parallelism": "2",
           "full-compaction.delta-commits": "1"}


def bits(x: float) -> int:
    """Java's Double.doubleToLongBits: what makes two DOUBLE keys one key (NaN canonical)."""
    return struct.unpack("<q", struct.pack("<d", NAN if math.isnan(x) else x))[0]


class DoubleKeyModel(UpsertModel):
    """The engine tests' model, keyed as Paimon keys a DOUBLE."""

    def key(self, row) -> tuple:
        return (bits(row["k"]),)

    def state(self) -> list[tuple]:
        return sorted((bits(r["k"]), r["dt"], r["v"]) for r in self.rows.values())


def state(rows) -> list[tuple]:
    return sorted((bits(r["k"]), r["dt"], r["v"]) for r in rows)


SPECIAL = [NAN, ODD_NAN, -0.0, 0.0, math.inf, -math.inf]


def batches(seed: int, count: int) -> list[list[dict]]:
    """Every batch holds the special keys (each NaN bit pattern in turn, both zeros) in random
    partitions, plus ordinary keys filling the buckets; one row per key."""
    rnd = random.Random(seed)
    out = []
    for b in range(count):
        keys = [ODD_NAN if b % 2 else NAN, -0.0, 0.0, math.inf, -math.inf]
        keys += [float(x) for x in rnd.sample([x for x in range(-20, 21) if x], 12)]
        out.append([{"k": k, "dt": rnd.choice("abc"), "v": 100 * b + i} for i, k in enumerate(keys)])
    return out


def test_nan_and_signed_zero_keys_move_across_partitions(spark, warehouse, execution):
    path = f"{warehouse}/db.db/float_keys"
    model = DoubleKeyModel(["k"], ["dt"])
    for i, batch in enumerate(batches(seed=11, count=4) + [batches(seed=12, count=1)[0]]):
        expected = model.apply(batch)
        df = spark.createDataFrame([(r["k"], r["dt"], r["v"]) for r in batch], SCHEMA)
        result = upsert(df, path, primary_keys="k", partition_keys="dt", options=OPTIONS,
                        settings=RunSettings(execution=execution))
        assert {k: getattr(result, k) for k in expected} == expected, f"batch {i}"
        if i:
            assert result.moved > 0
        want = model.state()
        table = FileStoreTable.open(path)
        # every key live in one place only, keyed as Paimon keys it
        live = [bits(r["k"]) for s in table.plan().splits for r in table.new_read(["k"]).read_split(s).to_pylist()]
        assert sorted(live) == sorted(set(live)) and len(live) == len(model.rows)
        assert {bits(-0.0), bits(0.0), bits(NAN)} <= set(live)
        spark_read = spark.read.format("paimon").load(path).collect()
        assert state(r.asDict() for r in spark_read) == want, f"batch {i}"
        assert state(table.to_arrow().to_pylist()) == want
        assert state(pypaimon_read(path).to_pylist()) == want
        # the APPEND snapshot, before its compaction: our merge of several files per bucket
        assert table.snapshots.snapshot(result.snapshot_id).commit_kind == "APPEND"
        if i:
            assert result.extra_snapshots, "full-compaction.delta-commits 1 compacts after every later commit"
        travelled = spark.read.format("paimon").option("snapshot-id", result.snapshot_id).load(path).collect()
        assert state(r.asDict() for r in travelled) == want
        assert state(table.to_arrow(snapshot_id=result.snapshot_id).to_pylist()) == want
