"""store/read/fold.py: a range's change records folded to one per key, held against the rules
written out row by row (a Python model of them): random records of keys that move between
partitions and buckets, are updated (-U/+U) and deleted, with null partition values and NaN keys."""

from __future__ import annotations

import math
import random

import pyarrow as pa
import pytest

from dbt_paimon.store.read.fold import fold
from dbt_paimon.store.read.incremental import ORDER_SCHEMA, ROW_KIND

_SCHEMA = pa.schema([pa.field(ROW_KIND, pa.string(), False)] + list(ORDER_SCHEMA)
                    + [pa.field("k", pa.float64()), pa.field("dt", pa.string()), pa.field("v", pa.int64())])


def _model(records: list[dict]) -> dict:
    """The rules, one record at a time: the last record of each (key, partition, bucket) by
    (snapshot, sequence, not -U); of those, per key, the last by (snapshot, not -D); no -U."""
    def key(r):  # NaN keys group together, as Spark groups them
        return "nan" if math.isnan(r["k"]) else r["k"]

    in_bucket = {}
    for r in sorted(records, key=lambda r: (r["_SNAPSHOT_ID"], r["_SEQUENCE_NUMBER"], r[ROW_KIND] != "-U")):
        in_bucket[(key(r), r["dt"], r["_BUCKET"])] = r
    latest = {}
    for r in sorted(in_bucket.values(), key=lambda r: (r["_SNAPSHOT_ID"], r[ROW_KIND] != "-D")):
        latest[key(r)] = r
    return {k: (r[ROW_KIND], r["dt"], r["v"]) for k, r in latest.items() if r[ROW_KIND] != "-U"}


def _records(seed: int) -> list[dict]:
    rng = random.Random(seed)
    out, sequence = [], {}
    for snapshot in range(1, 5):
        for _ in range(60):
            k = rng.choice([float(i) for i in range(12)] + [math.nan])
            dt, bucket = rng.choice(["a", "b", None]), rng.randrange(2)
            kinds = rng.choice([["+I"], ["-D"], ["-U", "+U"], ["+U"]])
            for kind in kinds:  # a bucket's sequence numbers only grow
                sequence[(dt, bucket)] = sequence.get((dt, bucket), 0) + 1
                out.append({ROW_KIND: kind, "_SNAPSHOT_ID": snapshot, "_BUCKET": bucket,
                            "_SEQUENCE_NUMBER": sequence[(dt, bucket)], "k": k, "dt": dt, "v": rng.randrange(1000)})
    # one snapshot at most moves a key once: drop a snapshot's second write of a key elsewhere
    seen, kept = {}, []
    for r in out:
        where = seen.setdefault((r["_SNAPSHOT_ID"], str(r["k"])), (r["dt"], r["_BUCKET"]))
        if where == (r["dt"], r["_BUCKET"]):
            kept.append(r)
    rng.shuffle(kept)
    return kept


@pytest.mark.parametrize("seed", range(5))
def test_the_fold_keeps_each_keys_last_change_by_the_rules(seed):
    records = _records(seed)
    folded = fold(pa.Table.from_pylist(records, schema=_SCHEMA), ["k"], ["dt"])
    assert folded.column_names == [ROW_KIND, "k", "dt", "v"]
    got = {}
    for r in folded.to_pylist():
        k = "nan" if math.isnan(r["k"]) else r["k"]
        assert k not in got, f"key {k} came out twice"
        got[k] = (r[ROW_KIND], r["dt"], r["v"])
    assert got == _model(records)


@pytest.mark.parametrize("before, after", [("a", None), (None, "a"), ("b", "a")])
def test_a_move_within_one_snapshot_comes_out_where_the_key_went(before, after):
    records = [
        {ROW_KIND: "+I", "_SNAPSHOT_ID": 1, "_BUCKET": 0, "_SEQUENCE_NUMBER": 1, "k": 1.0, "dt": before, "v": 1},
        {ROW_KIND: "+I", "_SNAPSHOT_ID": 2, "_BUCKET": 0, "_SEQUENCE_NUMBER": 1, "k": 1.0, "dt": after, "v": 2},
        {ROW_KIND: "-D", "_SNAPSHOT_ID": 2, "_BUCKET": 0, "_SEQUENCE_NUMBER": 2, "k": 1.0, "dt": before, "v": 1},
    ]
    for ordered in (records, records[::-1]):
        folded = fold(pa.Table.from_pylist(ordered, schema=_SCHEMA), ["k"], ["dt"])
        assert folded.to_pylist() == [{ROW_KIND: "+I", "k": 1.0, "dt": after, "v": 2}]
    assert fold(_SCHEMA.empty_table(), ["k"], ["dt"]).num_rows == 0
