"""GlobalIndexAssigner without Spark: what happens to a key by where it lives and by merge engine."""

import pyarrow as pa
import pytest

from dbt_paimon.assign.global_index_assigner import (BUCKET, KIND, OLD_BUCKET, OLD_SEQUENCE,
                                                     GlobalIndexAssigner, old_column)
from dbt_paimon.store.common.errors import DataError
from dbt_paimon.store.schema.schema import build_schema

ARROW = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])


def _schema(**options):
    return build_schema(ARROW, ["id"], ["dt"], {"dynamic-bucket.target-row-num": "2", **options})


def _rows(*rows):
    return pa.Table.from_pylist([dict(zip(("id", "dt", "v"), r)) for r in rows], ARROW)


def _existing(*entries, seq=None):
    """(id, dt, bucket) of live keys."""
    cols = {"id": [e[0] for e in entries], old_column("dt"): [e[1] for e in entries],
            OLD_BUCKET: pa.array([e[2] for e in entries], pa.int32())}
    if seq is not None:
        cols[OLD_SEQUENCE] = pa.array(seq, pa.int64())
    return pa.table(cols)


def _out(result):
    return sorted((r["id"], r["dt"], r["v"], r[BUCKET], r[KIND]) for r in result.rows.to_pylist())


def test_deduplicate_moves_a_key_with_a_delete_in_its_old_bucket():
    a = GlobalIndexAssigner(_schema())
    res = a.process(_rows((1, "b", 10), (2, "a", 20), (5, "a", 50)),
                    _existing((1, "a", 0), (2, "a", 0), (3, "a", 1), (4, "b", 0)))
    # 1 leaves a/0 (a -D there), its slot frees, 5 is new in a: a/0 has room again after the move
    # b/0 holds one key (4) of 2: key 1 joins it. The -D is the new row with the old partition,
    # as Paimon's DeleteExistingProcessor builds it (NOT NULL columns hold in it)
    assert _out(res) == [(1, "a", 10, 0, 3), (1, "b", 10, 0, 0), (2, "a", 20, 0, 0), (5, "a", 50, 0, 0)]
    assert res.counts.as_dict() == dict(inserted=1, updated=1, moved=1, deleted=0, skipped=0)


@pytest.mark.parametrize("engine", ["partial-update", "aggregation"])
def test_partial_update_and_aggregation_keep_the_old_partition(engine):
    a = GlobalIndexAssigner(_schema(**{"merge-engine": engine}))
    res = a.process(_rows((1, "b", 10)), _existing((1, "a", 3)))
    assert _out(res) == [(1, "a", 10, 3, 0)]
    assert (res.counts.updated, res.counts.moved) == (1, 0)


def test_first_row_skips_every_known_key():
    a = GlobalIndexAssigner(_schema(**{"merge-engine": "first-row"}))
    res = a.process(_rows((1, "b", 10), (2, "a", 20), (3, "a", 30)), _existing((1, "a", 0), (2, "a", 0)))
    assert _out(res) == [(3, "a", 30, 1, 0)]
    assert (res.counts.inserted, res.counts.skipped) == (1, 2)


def test_only_owned_buckets_are_opened():
    a = GlobalIndexAssigner(_schema(), num_assigners=3, assign_id=2)
    res = a.process(_rows(*[(i, "a", i) for i in range(5)]), _existing((100, "a", 0)))
    assert [r[3] for r in _out(res)] == [2, 2, 5, 5, 8]


def test_sequence_by_skips_older_rows_and_picks_the_newest_in_the_batch():
    schema = build_schema(ARROW.append(pa.field("seq", pa.int64())), ["id"], ["dt"])
    a = GlobalIndexAssigner(schema, sequence_by="seq")
    rows = pa.Table.from_pylist([{"id": 1, "dt": "b", "v": 1, "seq": 5}, {"id": 2, "dt": "a", "v": 2, "seq": 1},
                                 {"id": 2, "dt": "b", "v": 3, "seq": 9}], schema.arrow_schema())
    existing = _existing((1, "a", 0), (2, "a", 0), seq=[7, 1])
    res = a.process(rows, existing)
    assert [(r["id"], r["dt"], r["v"]) for r in res.rows.to_pylist() if r[KIND] == 0] == [(2, "b", 3)]
    assert res.counts.as_dict() == dict(inserted=0, updated=0, moved=1, deleted=0, skipped=2)


def test_duplicate_keys_without_sequence_by_name_the_keys():
    with pytest.raises(DataError, match=r"\{'id': 4\}"):
        GlobalIndexAssigner(_schema()).process(_rows((4, "a", 1), (4, "b", 2)))
    # each repeated key once, however often it repeats
    with pytest.raises(DataError) as e:
        GlobalIndexAssigner(_schema()).process(_rows((4, "a", 1), (5, "a", 1), (4, "b", 2), (4, "c", 3), (5, "a", 2)))
    assert "3 duplicate row(s) for key(s) {'id': 4}, {'id': 5};" in str(e.value)


def test_rowkind_field_deletes_a_key_where_it_lives():
    arrow = ARROW.append(pa.field("op", pa.string()))
    schema = build_schema(arrow, ["id"], ["dt"], {"rowkind.field": "op", "dynamic-bucket.target-row-num": "2"})
    rows = pa.Table.from_pylist([{"id": 1, "dt": "z", "v": None, "op": "-D"}, {"id": 9, "dt": "a", "v": 1, "op": "-D"},
                                 {"id": 5, "dt": "a", "v": 5, "op": "+I"}], arrow)
    res = GlobalIndexAssigner(schema).process(rows, _existing((1, "b", 4), (2, "a", 0), (3, "a", 0)))
    out = sorted((r["id"], r["dt"], r[BUCKET], r[KIND]) for r in res.rows.to_pylist())
    # 1 is deleted in b/4 where it lives (not in the z its row names); 9 does not exist; 5 opens a/1
    assert out == [(1, "b", 4, 3), (5, "a", 1, 0)]
    assert res.counts.as_dict() == dict(inserted=1, updated=0, moved=0, deleted=1, skipped=1)
    with pytest.raises(DataError, match="must hold"):
        GlobalIndexAssigner(schema).process(pa.Table.from_pylist([{"id": 1, "dt": "a", "v": 1, "op": "D"}], arrow))


def test_a_move_on_a_table_with_local_time_zone_timestamps():
    """Spark hands batches with its session zone on TIMESTAMP_LTZ columns; the -D rows of a move
    carry the table's: both must land in one output."""
    arrow = ARROW.append(pa.field("ts", pa.timestamp("us", tz="UTC")))
    schema = build_schema(arrow, ["id"], ["dt"])
    rows = pa.table({"id": [1], "dt": ["b"], "v": [1], "ts": pa.array([0], pa.timestamp("us", tz="Etc/UTC"))})
    res = GlobalIndexAssigner(schema).process(rows, _existing((1, "a", 0)))
    assert sorted((r["dt"], r[KIND]) for r in res.rows.to_pylist()) == [("a", 3), ("b", 0)]


def test_new_keys_fill_buckets_in_key_order_whatever_the_batch_order():
    """Unique keys leave the batch in its order (only the keys are sorted to find duplicates), yet
    each new key's bucket is the one key order gives it, as every assigner of either executor
    assigns them: the same batch in any order gets the same buckets. A bucket holds 2 keys here."""
    ids = [7, 3, 9, 1, 8, 2, 6, 4, 5, 10]
    rows = [(i, "ab"[i % 2], i * 10) for i in ids]
    existing = _existing((11, "a", 0), (4, "b", 0))  # 4 moves from b to a
    in_order = GlobalIndexAssigner(_schema()).process(_rows(*sorted(rows)), existing)
    shuffled = GlobalIndexAssigner(_schema()).process(_rows(*rows), existing)
    assert _out(shuffled) == _out(in_order)
    placed = {(r[0], r[1]): r[3] for r in _out(in_order) if r[4] == 0}
    # in key order within each partition: a's new keys 2, 4 (moved in), 6, 8, 10 fill a/0 (beside
    # 11), a/1, a/2; b's fill b/0 (4 left it), b/1, b/2
    assert [placed[(i, "a")] for i in (2, 4, 6, 8, 10)] == [0, 1, 1, 2, 2]
    assert [placed[(i, "b")] for i in (1, 3, 5, 7, 9)] == [0, 0, 1, 1, 2]
