"""pypaimon 2.1.0 reads what the store writes, identically to our reader and to an in-memory model."""

import datetime as dt
import os
import random
from decimal import Decimal

import pyarrow as pa
import pytest

from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.format.datafile import DELETE, INSERT, UPDATE_AFTER
from tests.oracle import model_rows, pypaimon_read, rows

ALL_TYPES = pa.schema([
    ("id", pa.int64()), ("dt", pa.string()), ("b", pa.bool_()), ("i8", pa.int8()), ("i16", pa.int16()),
    ("i32", pa.int32()), ("f32", pa.float32()), ("f64", pa.float64()), ("dec", pa.decimal128(10, 2)),
    ("bigdec", pa.decimal128(30, 4)), ("s", pa.string()), ("bin", pa.binary()), ("day", pa.date32()),
    ("ts3", pa.timestamp("ms")), ("ts6", pa.timestamp("us")),
])


def _value_row(rng: random.Random, key: int, version: int) -> dict:
    maybe = lambda v: None if rng.random() < 0.15 else v  # noqa: E731
    return {
        "id": key, "dt": f"2024-01-{key % 7 + 1:02d}", "b": maybe(rng.random() < 0.5),
        "i8": maybe(rng.randint(-128, 127)),
        "i16": maybe(rng.randint(-30000, 30000)), "i32": maybe(rng.randint(-2**31, 2**31 - 1)),
        "f32": maybe(float(rng.randint(-1000, 1000)) / 4), "f64": maybe(rng.uniform(-1e6, 1e6)),
        "dec": maybe(Decimal(rng.randint(-10**9, 10**9)) / 100),
        "bigdec": maybe(Decimal(rng.randint(-10**20, 10**20)) / 10000),
        "s": maybe(f"v{version}-" + "x" * rng.randint(0, 20)),
        "bin": maybe(bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 12)))),
        "day": maybe(dt.date(2000, 1, 1) + dt.timedelta(days=rng.randint(0, 9000))),
        "ts3": maybe(dt.datetime(2020, 1, 1) + dt.timedelta(milliseconds=rng.randint(0, 10**11))),
        "ts6": maybe(dt.datetime(2020, 1, 1) + dt.timedelta(microseconds=rng.randint(0, 10**14))),
    }


def assert_readers_agree(table_path: str, model: dict, key="id", snapshot_id=None):
    ours = FileStoreTable.open(table_path).to_arrow(snapshot_id=snapshot_id)
    theirs = pypaimon_read(table_path, snapshot_id)
    columns = ours.column_names
    expected = model_rows(model, columns, key)
    assert rows(ours, key) == expected
    assert rows(theirs.select(columns), key) == expected


def test_every_type_across_commits_with_updates_and_deletes(table_path):
    rng = random.Random(7)
    t = FileStoreTable.create(table_path, ALL_TYPES, ["id", "dt"], ["dt"], {"bucket": "-1"})
    model: dict = {}
    history = []
    for version in range(5):
        keys = rng.sample(range(200), 60)
        batch, kinds = [], []
        for k in keys:
            if k in model and rng.random() < 0.3:
                batch.append(model[k])
                kinds.append(DELETE)
                del model[k]
            else:
                row = _value_row(rng, k, version)
                kinds.append(UPDATE_AFTER if k in model else INSERT)
                model[k] = row
                batch.append(row)
        w = t.new_write()
        w.write(pa.Table.from_pylist(batch, ALL_TYPES), buckets=[r["id"] % 3 for r in batch], row_kinds=kinds)
        history.append((w.commit().snapshot.id, dict(model)))
    assert_readers_agree(table_path, model)
    # every older snapshot stays readable, identically (time travel)
    for snapshot_id, snap_model in history[:-1]:
        assert_readers_agree(table_path, snap_model, snapshot_id=snapshot_id)


def test_lone_file_with_delete_rows_in_a_bucket(table_path):
    """A bucket whose only file holds +I and -D rows: readers must not bring the -D rows back."""
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    t = FileStoreTable.create(table_path, schema, ["id"], [], {"bucket": "-1"})
    w = t.new_write()
    w.write(pa.table({"id": [1, 2, 3, 4], "v": ["a", "b", "c", "d"]}), buckets=0,
            row_kinds=[INSERT, DELETE, INSERT, DELETE])
    w.write(pa.table({"id": [10, 11], "v": ["x", "y"]}), buckets=1, row_kinds=[DELETE, DELETE])
    w.commit()
    files = {s.bucket: s.files for s in t.plan().splits}
    assert [f.delete_row_count for f in files[0]] == [2] and [f.delete_row_count for f in files[1]] == [2]
    assert_readers_agree(table_path, {1: {"id": 1, "v": "a"}, 3: {"id": 3, "v": "c"}})


PARTITION_TYPES = [
    (pa.bool_(), [True, False, None]),
    (pa.int8(), [-3, 0, 7, None]),
    (pa.int16(), [-300, 12, None]),
    (pa.int32(), [-1, 2**31 - 1, None]),
    (pa.int64(), [-(2**40), 5, None]),
    (pa.float32(), [1.5, -0.1, None]),
    (pa.float64(), [2.25, 1e-5, 12345678.9, None]),
    (pa.decimal128(8, 3), [Decimal("1.500"), Decimal("-20.125"), None]),
    (pa.string(), ["a", "with space", "x/y:z=1%", "", None]),
    (pa.date32(), [dt.date(2023, 5, 3), dt.date(1969, 7, 20), None]),
    (pa.timestamp("us"), [dt.datetime(2023, 5, 3, 10, 0), dt.datetime(2023, 5, 3, 10, 0, 5, 250000), None]),
    (pa.timestamp("ms"), [dt.datetime(2023, 5, 3, 10, 30, 1, 1000), None]),
]


@pytest.mark.parametrize("ptype,values", PARTITION_TYPES, ids=[str(t) for t, _ in PARTITION_TYPES])
def test_partition_values_of_every_type_including_null(warehouse, ptype, values):
    path = os.path.join(warehouse, "db.db", "p")
    schema = pa.schema([("id", pa.int64()), ("p", ptype), ("v", pa.int64())])
    # id alone is the key, so p is nullable: nulls go to partition.default-name
    t = FileStoreTable.create(path, schema, ["id"], ["p"], {"bucket": "-1"})
    data = [{"id": i, "p": values[i % len(values)], "v": i * 10} for i in range(3 * len(values))]
    w = t.new_write()
    w.write(pa.Table.from_pylist(data, schema), buckets=[i % 2 for i in range(len(data))])
    w.commit()
    dirs = sorted(d for d in os.listdir(path) if d.startswith("p="))
    assert len(dirs) == (len({str(v) for v in values if v not in (None, "")})
                         + (1 if None in values or "" in values else 0))
    if None in values:
        assert "p=__DEFAULT_PARTITION__" in dirs
    expected = {r["id"]: r for r in pa.Table.from_pylist(data, schema).to_pylist()}  # float32-rounded
    ours = FileStoreTable.open(path).to_arrow()
    theirs = pypaimon_read(path)
    assert rows(ours, "id") == model_rows(expected, ["id", "p", "v"], "id")
    assert rows(theirs.select(["id", "p", "v"]), "id") == model_rows(expected, ["id", "p", "v"], "id")


def test_many_partitions_and_projection_and_pruning(table_path):
    schema = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.float64())])
    t = FileStoreTable.create(table_path, schema, ["id", "dt"], ["dt"])
    n = 3000
    ids = list(range(n))
    data = pa.table({"id": ids, "dt": [f"d{i % 150:03d}" for i in ids], "v": [i / 7 for i in ids]})
    w = t.new_write()
    w.write(data, buckets=[(i // 150) % 4 for i in ids])
    w.commit()
    assert len({s.partition_values for s in t.plan().splits}) == 150
    assert len(t.plan().splits) == 600
    only = t.to_arrow(columns=["v", "id"], partition_filter={"dt": "d007"})
    assert only.column_names == ["v", "id"]
    assert sorted(only.column("id").to_pylist()) == [i for i in ids if i % 150 == 7]
    assert t.to_arrow(partition_filter=lambda p: p["dt"] >= "d140").num_rows == sum(1 for i in ids if i % 150 >= 140)
    assert pypaimon_read(table_path).num_rows == n


def test_files_roll_at_target_file_size(table_path):
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    t = FileStoreTable.create(table_path, schema, ["id"], [], {"target-file-size": "32kb"})
    n = 20000
    w = t.new_write()
    w.write(pa.table({"id": list(range(n))[::-1], "v": [f"value-{i * 7919 % 100003}" for i in range(n)]}), buckets=0)
    w.commit()
    files = t.plan().splits[0].files
    assert len(files) > 2
    # each file is a sorted run with its own key range, and sequence numbers continue across files
    assert sum(f.row_count for f in files) == n
    spans = sorted((f.min_sequence_number, f.max_sequence_number) for f in files)
    assert all(a[1] + 1 == b[0] for a, b in zip(spans, spans[1:]))
    assert all(f.file_size < 32 * 1024 * 2 for f in files)
    assert rows(pypaimon_read(table_path), "id") == rows(t.to_arrow(), "id")
    assert t.to_arrow().num_rows == n
