"""Shared helpers of the engine tests: batches as DataFrames and the three readers to compare."""

from __future__ import annotations

import os
import random
from collections import Counter

import pyarrow as pa

from dbt_paimon.store.common.fileio import FileIO
from dbt_paimon.store.table import FileStoreTable
from tests.oracle import pypaimon_read

SCHEMA = "id bigint, dt string, v bigint, s string, amount int, flag boolean, seq bigint"
COLUMNS = ["id", "dt", "v", "s", "amount", "flag", "seq"]


def frame(spark, rows, schema: str = SCHEMA):
    cols = [c.split()[0] for c in schema.split(",")]
    return spark.createDataFrame([tuple(r[c] for c in cols) for r in rows], schema)


def by_key(rows, key="id"):
    return sorted(rows, key=lambda r: r[key])


def spark_rows(spark, path, snapshot_id=None):
    reader = spark.read.format("paimon")
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", str(snapshot_id))
    return by_key([r.asDict() for r in reader.load(path).collect()])


def pypaimon_rows(path, snapshot_id=None):
    return by_key(pypaimon_read(path, snapshot_id).to_pylist())


def live_places(path, snapshot_id: int | None = None) -> Counter:
    """How many (partition, bucket) places each key is live in, read split by split."""
    table = FileStoreTable.open(path)
    keys = list(table.schema.primary_keys)
    reader = table.new_read(keys)
    places: Counter = Counter()
    for split in table.plan(snapshot_id).splits:
        for row in reader.read_split(split).to_pylist():
            places[tuple(row[k] for k in keys)] += 1
    return places


def keys_live_twice(path) -> dict:
    """Every snapshot's keys live in more than one place, by snapshot id and the kind of its commit:
    what a failed contention test reports, so that a rare failure names the commit that made it."""
    table = FileStoreTable.open(path)
    found = {}
    for sid in range(1, table.latest_snapshot().id + 1):
        twice = sorted(k for k, n in live_places(path, sid).items() if n > 1)
        if twice:
            snap = table.snapshots().snapshot(sid)
            found[sid] = (snap.commit_kind, snap.commit_user[:8], twice)
    return found


def data_files(path) -> set:
    """Every data file under the table, on a local disk or an object store."""
    return {st.path for st in FileIO.get(path).list_status(path, recursive=True)
            if st.path.rsplit("/", 1)[-1].startswith("data-")}


def partition_dirs(path) -> list:
    return sorted(n for n in FileIO.get(path).list_names(path) if n.startswith("dt="))


SQL_SCHEMA = "id bigint, dt string, v int"


def sql_tables(spark, warehouse: str) -> str:
    """db.keyed (primary key id, dt; partitioned by dt), db.cross (key id, partitioned by dt: a
    cross-partition table) and db.logs (an append table) in `warehouse`, each holding (1, a, 10),
    (2, a, 20), (3, b, 30), in Spark's catalog as Spark SQL sees them (sql/); their directory."""
    from dbt_paimon.engine import RunSettings, write
    from dbt_paimon.sql import register
    from dbt_paimon.engine import upsert

    rows = spark.createDataFrame([(1, "a", 10), (2, "a", 20), (3, "b", 30)], SQL_SCHEMA)
    base = f"{warehouse}/db.db"
    os.makedirs(base, exist_ok=True)
    local = RunSettings(execution="local")
    upsert(rows, f"{base}/keyed", primary_keys=["id", "dt"], partition_keys="dt", options={"bucket": "2"},
           settings=local)
    upsert(rows, f"{base}/cross", primary_keys="id", partition_keys="dt", settings=local)
    write(rows, f"{base}/logs", partition_keys="dt", settings=local)
    register(spark, warehouse=warehouse)
    return base


CHANGES_SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("dt", pa.string())])


def random_history(path: str, seed: str, producer: str, partitioned: bool, commits: int = 5) -> FileStoreTable:
    """A key table of CHANGES_SCHEMA (2 buckets; keyed by id and dt and partitioned by dt, or keyed by
    id) written by the store in `commits` commits of 6 random keys, each row +I, +U or -D: a history
    for incremental reads. The table as the last commit left it."""
    rnd = random.Random(seed)
    FileStoreTable.create(path, CHANGES_SCHEMA, primary_keys=["id", "dt"] if partitioned else ["id"],
                          partition_keys=["dt"] if partitioned else [],
                          options={"bucket": "2", "changelog-producer": producer})
    for s in range(commits):
        ids = rnd.sample(range(20), 6)
        write = FileStoreTable.open(path).new_write()
        write.write(pa.table({"id": ids, "v": [f"v{s}-{i}" for i in ids], "dt": [f"d{i % 2}" for i in ids]}),
                    row_kinds=[rnd.choice([0, 2, 3]) for _ in ids])  # +I, +U, -D
        write.commit()
    return FileStoreTable.open(path)


def change_records(table: pa.Table) -> list[tuple]:
    """An incremental read's or audit log's rows of CHANGES_SCHEMA as sorted (rowkind, id, v)."""
    return sorted(zip(*(table.column(c).to_pylist() for c in ("rowkind", "id", "v"))))
