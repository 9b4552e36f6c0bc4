"""Tables Java Paimon wrote, of every atomic type and several kinds, read through every way the product
reads (read(), SQL on the catalog entry, spark.table, the `paimon` source, the store): identical rows,
and Java's own read of them. The kinds put files on both sides of read/native.py's line: buckets
merged by position (level-0 files over a first write, with deletes), a full compaction (one file a
bucket), deletion vectors, an append table. (Java's batch writer here has no temporary disk for the
lookup a first-row table's writes need: first-row tables are read in test_read_paths.py.)"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from dbt_paimon.engine import read
from dbt_paimon.sql import register
from dbt_paimon.store import FileStoreTable

from tests.oracle import rows

from .data import JAVA_FIELDS, KEY, PARTITION, SCHEMA, random_rows
from .javapaimon import Maintain, Read, Write

KINDS = {  # name -> (primary keys, options, compacted by Java after its writes)
    "merged": (KEY, {"bucket": "2"}, False),
    "compacted": (KEY, {"bucket": "2"}, True),
    "dv": (KEY, {"bucket": "2", "deletion-vectors.enabled": "true"}, False),
    "appended": ([], {"bucket": "-1"}, False),
}


@pytest.fixture(scope="module")
def written(java, tmp_path_factory):
    warehouse = tmp_path_factory.mktemp("java-read-paths") / "wh"
    (warehouse / "db.db").mkdir(parents=True)
    rng = random.Random(58)
    first, second = random_rows(rng, range(60), 1), random_rows(rng, range(0, 80, 3), 2)
    requests, paths = [], {}
    for name, (key, options, compacted) in KINDS.items():
        path = paths[name] = str(warehouse / "db.db" / f"jr_{name}")
        create = {"fields": JAVA_FIELDS, "primary_keys": key, "partition_keys": PARTITION, "options": options}
        deletes = [{**r, "_kind": "-D"} for r in first[:5]] if key and name != "first_row" else []
        requests += [Write(path, first, create), Write(path, second + deletes)]
        if compacted:
            requests.append(Maintain(path, "compact"))
    requests += [Read(p) for p in paths.values()]
    results = java.run(requests)
    assert not [r for r in results if isinstance(r, Exception)], results
    return str(warehouse), paths, dict(zip(paths, results[-len(paths):]))


def _arrow(df) -> pa.Table:
    return df.toArrow()


def test_every_read_path_gives_javas_rows(spark, written):
    warehouse, paths, java_read = written
    register(spark, warehouse=warehouse)
    key = KEY
    for name, path in paths.items():
        want = rows(java_read[name], key) if KINDS[name][0] else sorted(java_read[name].to_pylist(), key=repr)
        order = (lambda t: rows(t, key)) if KINDS[name][0] else (lambda t: sorted(t.to_pylist(), key=repr))
        ways = {
            "store": FileStoreTable.open(path).to_arrow(),
            "read()": _arrow(read(spark, path)),
            "spark.sql": _arrow(spark.sql(f"select * from db.jr_{name}")),
            "spark.table": _arrow(spark.table(f"db.jr_{name}")),
            "format(paimon)": _arrow(spark.read.format("paimon").load(path)),
        }
        assert len(want) > 20, name
        for way, table in ways.items():
            assert table.schema.names == SCHEMA.names, (name, way)
            assert order(table) == want, (name, way)
        # the columns and filters a query uses, natively where the files allow
        assert spark.sql(f"select count(*), sum(n), max(ts), min(ltz), max(big) from db.jr_{name} where dt = '2024-02'"
                         ).collect() == spark.read.format("paimon").load(path).where("dt = '2024-02'").selectExpr(
            "count(*)", "sum(n)", "max(ts)", "min(ltz)", "max(big)").collect(), name
