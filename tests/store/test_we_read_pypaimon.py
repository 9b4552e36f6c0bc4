"""Our reader reads tables that pypaimon 2.1.0 writes, identically to pypaimon itself."""

import datetime as dt
import random
from decimal import Decimal

import pyarrow as pa
import pytest

from dbt_paimon.store import FileStoreTable
from tests.oracle import pypaimon_read, rows

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("name", pa.string()), ("amount", pa.decimal128(10, 2)),
                    ("ts", pa.timestamp("us")), ("day", pa.date32()), ("score", pa.float64())])


def _write_with_pypaimon(warehouse: str, name: str, options: dict, batches: list[pa.Table]):
    from pypaimon import CatalogFactory, Schema

    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database("db", True)
    catalog.create_table(f"db.{name}", Schema.from_pyarrow_schema(
        SCHEMA, partition_keys=["dt"], primary_keys=["id", "dt"], options=options), False)
    table = catalog.get_table(f"db.{name}")
    for batch in batches:
        wb = table.new_batch_write_builder()
        write, commit = wb.new_write(), wb.new_commit()
        write.write_arrow(batch)
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()


def _batches(seed: int) -> list[pa.Table]:
    rng = random.Random(seed)
    out = []
    for version in range(4):
        keys = rng.sample(range(500), 150)
        out.append(pa.Table.from_pylist([{
            "id": k, "dt": f"2024-0{k % 3 + 1}", "name": None if rng.random() < 0.1 else f"n{version}-{k}",
            "amount": Decimal(rng.randint(0, 10**6)) / 100,
            "ts": dt.datetime(2024, 1, 1) + dt.timedelta(seconds=k * version),
            "day": dt.date(2024, 1, 1) + dt.timedelta(days=version), "score": rng.random(),
        } for k in keys], SCHEMA))
    return out


@pytest.mark.parametrize("options", [{"bucket": "3"}, {"bucket": "-1", "dynamic-bucket.target-row-num": "50"}],
                         ids=["fixed-bucket", "dynamic-bucket"])
def test_read_pypaimon_written_table(warehouse, options):
    import os

    _write_with_pypaimon(warehouse, "pp", options, _batches(11))
    path = os.path.join(warehouse, "db.db", "pp")
    ours_table = FileStoreTable.open(path)
    ours = ours_table.to_arrow()
    theirs = pypaimon_read(path)
    assert ours.num_rows == theirs.num_rows > 0
    assert rows(ours, ["id", "dt"]) == rows(theirs.select(ours.column_names), ["id", "dt"])
    # older snapshots too
    assert rows(ours_table.to_arrow(snapshot_id=2), ["id", "dt"]) == rows(
        pypaimon_read(path, 2).select(ours.column_names), ["id", "dt"])
    # and several files per bucket were really merged (the test would be empty otherwise)
    assert max(len(s.files) for s in ours_table.plan().splits) > 1


def test_fixed_bucket_rows_land_where_pypaimon_puts_them(warehouse):
    """We write a bucket=3 table without naming buckets; pypaimon then updates the same keys.
    If our bucket function differed from Paimon's, a key would live in two buckets and show twice."""
    import os

    path = os.path.join(warehouse, "db.db", "fixed")
    base = _batches(3)[0]
    t = FileStoreTable.create(path, SCHEMA, ["id", "dt"], ["dt"], {"bucket": "3"})
    w = t.new_write()
    w.write(base)
    w.commit()
    assert {s.bucket for s in t.plan().splits} == {0, 1, 2}
    from tests.oracle import pypaimon_table

    table = pypaimon_table(path)
    update = base.set_column(2, "name", pa.array(["updated"] * base.num_rows))
    wb = table.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(update)
    commit.commit(write.prepare_commit())
    ours = FileStoreTable.open(path).to_arrow()
    assert ours.num_rows == base.num_rows
    assert set(ours.column("name").to_pylist()) == {"updated"}
    assert rows(ours, ["id", "dt"]) == rows(pypaimon_read(path).select(ours.column_names), ["id", "dt"])
    # every split holds both writers' files: same bucket for the same key
    assert all(len(s.files) == 2 for s in FileStoreTable.open(path).plan().splits)
