"""GlobalIndexAssigner with FLOAT/DOUBLE keys: a key is found where it lives as Paimon compares keys
(Double.compare: every NaN is one key, -0.0 and 0.0 are two)."""

import math

import numpy as np
import pyarrow as pa
import pytest

from dbt_paimon.assign.global_index_assigner import (BUCKET, KIND, OLD_BUCKET, OLD_SEQUENCE, GlobalIndexAssigner,
                                                     old_column)
from dbt_paimon.store.format.datafile import DELETE, INSERT
from dbt_paimon.store.common.errors import DataError
from dbt_paimon.store.schema.schema import build_schema

NAN = float("nan")
# Another NaN bit pattern, whose payload survives narrowing to FLOAT (0x7FC00001)
ODD_NAN = float(np.array([0x7FF8_0000_2000_0000], dtype=np.uint64).view(np.float64)[0])


def _schema(key_type=pa.float64(), **options):
    arrow = pa.schema([("k", key_type), ("dt", pa.string()), ("v", pa.int64())])
    return build_schema(arrow, ["k"], ["dt"], {"dynamic-bucket.target-row-num": "100", **options})


def _rows(schema, *rows):
    return pa.Table.from_pylist([dict(zip(("k", "dt", "v"), r)) for r in rows], schema.arrow_schema())


def _existing(schema, *entries, seq=None):
    """(k, dt, bucket) of live keys."""
    cols = {"k": pa.array([e[0] for e in entries], schema.field("k").type.to_arrow()),
            old_column("dt"): [e[1] for e in entries], OLD_BUCKET: pa.array([e[2] for e in entries], pa.int32())}
    if seq is not None:
        cols[OLD_SEQUENCE] = pa.array(seq, pa.int64())
    return pa.table(cols)


def _key(x):
    """A printable key that keeps the sign of zero and calls every NaN 'nan'."""
    return "nan" if math.isnan(x) else ("-0.0" if x == 0 and math.copysign(1, x) < 0 else repr(x))


def _out(result):
    return sorted((_key(r["k"]), r["dt"], r["v"], r[BUCKET], r[KIND]) for r in result.rows.to_pylist())


@pytest.mark.parametrize("key_type", [pa.float64(), pa.float32()], ids=["double", "float"])
def test_a_nan_key_found_in_another_partition_moves_and_signed_zeros_stay_apart(key_type):
    schema = _schema(key_type)
    a = GlobalIndexAssigner(schema)
    # stored: a NaN (canonical bits) and -0.0 in a/0; the batch: a NaN of other bits to b, 0.0 to a
    res = a.process(_rows(schema, (ODD_NAN, "b", 1), (0.0, "a", 2)),
                    _existing(schema, (NAN, "a", 0), (-0.0, "a", 0)))
    # NaN moves: -D in a/0, the row into b; 0.0 is a new key (it is not -0.0), -0.0 is untouched
    # -D: the new row, old partition
    assert _out(res) == [("0.0", "a", 2, 0, INSERT), ("nan", "a", 1, 0, DELETE), ("nan", "b", 1, 0, INSERT)]
    assert res.counts.as_dict() == dict(inserted=1, updated=0, moved=1, deleted=0, skipped=0)


def test_negative_zero_found_in_its_partition_is_an_update_not_zero():
    schema = _schema()
    res = GlobalIndexAssigner(schema).process(_rows(schema, (-0.0, "a", 5), (NAN, "a", 6)),
                                              _existing(schema, (0.0, "b", 5), (-0.0, "a", 3), (NAN, "a", 2)))
    assert _out(res) == [("-0.0", "a", 5, 3, INSERT), ("nan", "a", 6, 2, INSERT)]
    assert res.counts.as_dict() == dict(inserted=0, updated=2, moved=0, deleted=0, skipped=0)


def test_first_row_skips_a_known_nan_key():
    schema = _schema(**{"merge-engine": "first-row"})
    res = GlobalIndexAssigner(schema).process(_rows(schema, (ODD_NAN, "b", 1), (-0.0, "b", 2)),
                                              _existing(schema, (NAN, "a", 0), (0.0, "a", 0)))
    assert _out(res) == [("-0.0", "b", 2, 0, INSERT)]
    assert (res.counts.inserted, res.counts.skipped) == (1, 1)


def test_in_a_batch_signed_zeros_are_two_keys_and_nans_one():
    schema = _schema()
    res = GlobalIndexAssigner(schema).process(_rows(schema, (0.0, "a", 1), (-0.0, "a", 2)))
    assert _out(res) == [("-0.0", "a", 2, 0, INSERT), ("0.0", "a", 1, 0, INSERT)]
    with pytest.raises(DataError, match="duplicate"):
        GlobalIndexAssigner(schema).process(_rows(schema, (NAN, "a", 1), (ODD_NAN, "b", 2)))


def test_sequence_by_picks_among_nan_versions_and_checks_the_stored_one():
    arrow = pa.schema([("k", pa.float64()), ("dt", pa.string()), ("v", pa.int64()), ("seq", pa.int64())])
    schema = build_schema(arrow, ["k"], ["dt"])
    rows = pa.Table.from_pylist([{"k": NAN, "dt": "b", "v": 1, "seq": 5}, {"k": ODD_NAN, "dt": "c", "v": 2, "seq": 9},
                                 {"k": -0.0, "dt": "b", "v": 3, "seq": 1}], schema.arrow_schema())
    res = GlobalIndexAssigner(schema, sequence_by="seq").process(
        rows, _existing(schema, (NAN, "a", 0), (0.0, "a", 0), seq=[7, 100]))
    # NaN: the seq-9 version wins the batch and is newer than the stored 7, so it moves to c;
    # -0.0 is a new key whatever 0.0's stored sequence
    assert sorted((_key(r["k"]), r["dt"], r["v"], r[KIND]) for r in res.rows.to_pylist()) == [
        ("-0.0", "b", 3, INSERT), ("nan", "a", 2, DELETE), ("nan", "c", 2, INSERT)]
    assert res.counts.as_dict() == dict(inserted=1, updated=0, moved=1, deleted=0, skipped=1)


def test_stored_key_live_twice_is_kept_once_by_key_equality():
    schema = _schema()
    # a broken table holding the NaN key in two places (two bit patterns): they are one key, so one
    # place is kept (the highest bucket), whichever NaN bits the batch row carries
    for batch_nan in (NAN, ODD_NAN):
        res = GlobalIndexAssigner(schema).process(_rows(schema, (batch_nan, "a", 1)),
                                                  _existing(schema, (ODD_NAN, "a", 4), (NAN, "a", 2)))
        assert _out(res) == [("nan", "a", 1, 4, INSERT)]
    # 0.0 live twice with -0.0 between them in (key, bucket) order under a sort that ties the zeros
    res = GlobalIndexAssigner(schema).process(_rows(schema, (0.0, "a", 1), (-0.0, "a", 2)),
                                              _existing(schema, (0.0, "a", 1), (-0.0, "a", 2), (0.0, "a", 3)))
    assert _out(res) == [("-0.0", "a", 2, 2, INSERT), ("0.0", "a", 1, 3, INSERT)]
    assert res.counts.as_dict() == dict(inserted=0, updated=2, moved=0, deleted=0, skipped=0)


def test_sequence_by_supersedes_versions_of_zero_with_negative_zero_in_between():
    arrow = pa.schema([("k", pa.float64()), ("dt", pa.string()), ("v", pa.int64()), ("seq", pa.int64())])
    schema = build_schema(arrow, ["k"], ["dt"])
    # by (key, seq) with the zeros tied, -0.0 (seq 3) would sit between the two 0.0 versions
    rows = pa.Table.from_pylist([{"k": 0.0, "dt": "a", "v": 1, "seq": 1}, {"k": -0.0, "dt": "a", "v": 2, "seq": 3},
                                 {"k": 0.0, "dt": "a", "v": 3, "seq": 5}], schema.arrow_schema())
    res = GlobalIndexAssigner(schema, sequence_by="seq").process(rows)
    assert sorted((_key(r["k"]), r["v"]) for r in res.rows.to_pylist()) == [("-0.0", 2), ("0.0", 3)]
    assert (res.counts.inserted, res.counts.skipped) == (2, 1)


def test_a_key_moving_from_partition_negative_zero_to_zero_moves():
    # a DOUBLE partition field outside the key: partition -0.0 is not partition 0.0 (BinaryRow bytes differ)
    arrow = pa.schema([("id", pa.int64()), ("p", pa.float64()), ("v", pa.int64())])
    schema = build_schema(arrow, ["id"], ["p"])
    rows = pa.Table.from_pylist([{"id": 1, "p": 0.0, "v": 10}, {"id": 2, "p": -0.0, "v": 20}], schema.arrow_schema())
    existing = pa.table({"id": [1, 2], old_column("p"): [-0.0, -0.0], OLD_BUCKET: pa.array([0, 0], pa.int32())})
    res = GlobalIndexAssigner(schema).process(rows, existing)
    assert sorted((r["id"], _key(r["p"]), r["v"], r[KIND]) for r in res.rows.to_pylist()) == [
        (1, "-0.0", 10, DELETE), (1, "0.0", 10, INSERT), (2, "-0.0", 20, INSERT)]
    assert res.counts.as_dict() == dict(inserted=0, updated=1, moved=1, deleted=0, skipped=0)
