"""engine.changes(): a table's changes between two snapshots, one record per key, held against the
table's own states at both ends (read through the store): every key whose row differs comes out,
as its row at the end or as -D when it is gone, and nothing else but keys the range wrote.
Random histories of upserts (keys moving partitions) and deletes, on the bucket modes, on tables
whose records are folded and on those whose two snapshots are compared (diff)."""

import pytest

from dbt_paimon.engine import changes, compact, delete, upsert, write
from dbt_paimon.store.table import FileStoreTable

from ..helpers import COLUMNS, frame
from ..model import random_batches


def _state(path, snapshot_id, keys):
    if snapshot_id is None or snapshot_id == 0:
        return {}
    rows = FileStoreTable.open(path).to_arrow(snapshot_id=snapshot_id).to_pylist()
    return {tuple(r[k] for k in keys): r for r in rows}


def _check(spark, path, start, end, keys):
    before, after = _state(path, start, keys), _state(path, end, keys)
    got = {}
    for r in changes(spark, path, start, end).collect():
        row = r.asDict()
        key = tuple(row[k] for k in keys)
        assert key not in got, f"key {key} came out twice between {start} and {end}"
        got[key] = (row.pop("rowkind"), row)
    differ = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert differ <= set(got), f"{start}..{end}: changed keys missing: {sorted(differ - set(got))[:5]}"
    for key, (kind, row) in got.items():
        if key in after:
            assert kind in ("+I", "+U") and row == after[key], (start, end, key, kind, row, after[key])
        else:
            assert kind == "-D", (start, end, key, kind, row)
    return got


def _history(spark, path, keys, partition_keys, options, seed):
    """Three upserts and a delete; the snapshot ids after each. The `full-compaction` producer writes
    the changelog when a full compaction runs: one follows each write there."""
    ids = []

    def written():
        if options.get("changelog-producer") == "full-compaction":
            compact(spark, path)
        ids.append(FileStoreTable.open(path).snapshots.latest_id())

    for i, batch in enumerate(random_batches(seed=seed, batches=3, size=25, key_space=40)):
        upsert(frame(spark, batch), path, primary_keys=keys, partition_keys=partition_keys, options=options)
        written()
        if i == 1:
            delete(spark, path, "id % 4 = 0")
            written()
    return ids


@pytest.mark.parametrize("case", [
    pytest.param((["id"], ["dt"], {}), id="cross-partition"),
    pytest.param((["id", "dt"], ["dt"], {"bucket": "2"}), id="fixed-bucket"),
    pytest.param((["id"], [], {"changelog-producer": "lookup"}), id="dynamic-bucket-lookup"),
    pytest.param((["id"], ["dt"], {"merge-engine": "partial-update", "changelog-producer": "full-compaction",
                                 "partial-update.remove-record-on-delete": "true"}),
                 id="cross-partition-partial-update-full-compaction"),
    # records that are not rows: the two snapshots compared (diff)
    pytest.param((["id"], ["dt"], {"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"}),
                 id="cross-partition-partial-update-diff"),
    pytest.param((["id", "dt"], ["dt"], {"bucket": "2", "sequence.field": "seq"}), id="fixed-sequence-field-diff"),
])
def test_changes_are_each_changed_key_once_as_it_became(spark, warehouse, case):
    keys, partition_keys, options = case
    path = f"{warehouse}/db.db/changes_{abs(hash(str(case)))}"
    ids = _history(spark, path, keys, partition_keys, options, seed=len(keys) * 7 + len(options))
    for start, end in [(0, ids[0]), (ids[0], ids[1]), (ids[0], ids[-1]), (ids[1], ids[2]), (ids[2], ids[-1])]:
        _check(spark, path, start, end, keys)
    # nothing written between: nothing out
    assert changes(spark, path, ids[-1], ids[-1]).count() == 0
    # a start of None: every row of the end, as +I
    everything = changes(spark, path, None, ids[1]).collect()
    assert {r.rowkind for r in everything} == {"+I"}
    assert len(everything) == len(_state(path, ids[1], keys))


def test_a_deleted_key_comes_out_once_as_minus_d_and_a_moved_one_where_it_went(spark, warehouse):
    path = f"{warehouse}/db.db/changes_moves"
    row = {c: None for c in COLUMNS}
    upsert(frame(spark, [{**row, "id": 1, "dt": "a", "v": 1}, {**row, "id": 2, "dt": "a", "v": 2}]), path,
           primary_keys="id", partition_keys="dt")
    first = FileStoreTable.open(path).snapshots.latest_id()
    upsert(frame(spark, [{**row, "id": 1, "dt": "b", "v": 10}]), path, primary_keys="id", partition_keys="dt")
    delete(spark, path, "id = 2")
    last = FileStoreTable.open(path).snapshots.latest_id()
    got = {r.id: (r.rowkind, r.dt, r.v) for r in changes(spark, path, first, last).collect()}
    assert got == {1: ("+I", "b", 10), 2: ("-D", "a", 2)}


def test_an_append_tables_changes_are_its_new_rows(spark, warehouse):
    path = f"{warehouse}/db.db/changes_append"
    row = {c: None for c in COLUMNS}
    write(frame(spark, [{**row, "id": i, "dt": "a"} for i in range(3)]), path)
    write(frame(spark, [{**row, "id": i, "dt": "b"} for i in range(3, 5)]), path)
    got = sorted((r.rowkind, r.id) for r in changes(spark, path, 1, 2).collect())
    assert got == [("+I", 3), ("+I", 4)]


def test_the_fold_in_spark_gives_what_one_tasks_fold_gives(spark, warehouse, monkeypatch):
    """Records up to one task's share are folded in that task (store/read/fold.py); more are folded
    in Spark after a shuffle by key, by the same rules: both answer alike, range by range."""
    from collections import Counter

    from dbt_paimon.engine.read import changes as changes_module

    path = f"{warehouse}/db.db/changes_two_folds"
    ids = _history(spark, path, ["id"], ["dt"], {}, seed=11)
    ranges = [(ids[0], ids[-1]), (ids[1], ids[2]), (ids[0], ids[1])]

    def answers():
        out = {}
        for r in ranges:
            df = changes(spark, path, *r)
            plan = df._jdf.queryExecution().optimizedPlan().toString()
            out[r] = (Counter(map(tuple, df.collect())), "Window" in plan)
        return out

    in_one_task = answers()
    monkeypatch.setattr(changes_module, "tasks_for", lambda count: 2)
    in_spark = answers()
    for r in ranges:
        assert not in_one_task[r][1] and in_spark[r][1], "each fold ran where it should"
        assert in_spark[r][0] == in_one_task[r][0] and in_spark[r][0], r


@pytest.mark.parametrize("fold", ["one task", "spark"])
def test_an_ignore_delete_tables_minus_d_records_change_nothing(spark, warehouse, monkeypatch, fold):
    """`ignore-delete`: -D records another writer streamed into the table are not changes (the table
    keeps those rows), in either fold."""
    import pyarrow as pa

    from dbt_paimon.engine.read import changes as changes_module

    if fold == "spark":
        monkeypatch.setattr(changes_module, "tasks_for", lambda count: 2)
    path = f"{warehouse}/db.db/changes_ignore_delete_{fold.replace(' ', '_')}"
    row = {c: None for c in COLUMNS}
    options = {"bucket": "1", "ignore-delete": "true"}
    upsert(frame(spark, [{**row, "id": i, "dt": "a", "v": i} for i in range(4)]), path, primary_keys="id",
           options=options)
    first = FileStoreTable.open(path).snapshots.latest_id()
    table = FileStoreTable.open(path)
    writer = table.new_write()
    gone = [{**row, "id": i, "dt": "a", "v": i} for i in (0, 1)]
    writer.write(pa.Table.from_pylist(gone, table.schema.arrow_schema()), row_kinds=[3] * len(gone))
    writer.commit()
    upsert(frame(spark, [{**row, "id": 2, "dt": "a", "v": 20}]), path, primary_keys="id", options=options)
    last = FileStoreTable.open(path).snapshots.latest_id()
    got = {r.id: (r.rowkind, r.v) for r in changes(spark, path, first, last).collect()}
    assert got == {2: ("+I", 20)}
    assert len(FileStoreTable.open(path).to_arrow()) == 4
