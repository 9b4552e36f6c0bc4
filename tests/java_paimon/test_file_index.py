"""Data-file indexes (`file-index.bloom-filter.columns`, `file-index.bitmap.columns`, issue 40) between
Java Paimon and us: Java's filtered read of a table we wrote uses our indexes (a bitmap narrows its
read to the rows it names, so a wrong bitmap would lose rows or keep others), and our reads skip the
files Java's indexes rule out, with the rows the model says.
"""

from __future__ import annotations

from dbt_paimon.engine import RunSettings
from dbt_paimon.engine import upsert
from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.index.file_index import Condition
from dbt_paimon.store.read.read import TableRead
from tests.oracle import rows

from .javapaimon import Read, Write

SPARK = "id bigint, v string, n int"
OPTIONS = {"bucket": "2", "deletion-vectors.enabled": "true",
           "file-index.bitmap.columns": "n",  # small: in the file's meta
           "file-index.bloom-filter.columns": "v"}  # 1,000,000 items: a file of its own beside the data file
BATCHES = [[(k, f"v{k}", k % 3) for k in range(12)], [(k, f"w{k}", 7) for k in range(0, 12, 4)]]


def _model() -> list[dict]:
    live = {}
    for batch in BATCHES:
        live.update({k: {"id": k, "v": v, "n": n} for k, v, n in batch})
    return [live[k] for k in sorted(live)]


def test_javas_filtered_reads_use_our_indexes(spark, java, warehouse):
    path = f"{warehouse}/db.db/indexed"
    for batch in BATCHES:
        upsert(spark.createDataFrame(batch, SPARK), path, primary_keys="id", options=OPTIONS,
               settings=RunSettings(execution="local"))
    files = [f for s in FileStoreTable.open(path).plan().splits for f in s.files]
    assert all(f.embedded_index is None and len(f.extra_files) == 1 for f in files)  # the bloom filter's size
    model = _model()
    equal = [{"n": 7}, {"n": 1}, {"n": 5}, {"v": "w4"}, {"v": "v4"}, {"v": "nope"}]
    results = java.run([Read(path)] + [Read(path, equal=e) for e in equal])
    assert rows(results[0], "id") == model
    for e, got in zip(equal, results[1:]):
        (column, value), = e.items()
        want = [r for r in model if r[column] == value]
        got = rows(got, "id")
        if column == "n":  # the bitmap selects the rows: exactly the matching ones
            assert got == want, e
        else:  # a bloom filter only skips files
            assert all(r in got for r in want) and all(r in model for r in got), e
        df = spark.read.format("paimon").load(path).where(f"{column} = {value!r}")  # our source, skipping files
        assert sorted((r.asDict() for r in df.collect()), key=lambda r: r["id"]) == want, e


def test_we_skip_the_files_javas_indexes_rule_out(spark, java, warehouse):
    path = f"{warehouse}/db.db/java_indexed"
    create = {"fields": [("id", "BIGINT NOT NULL"), ("v", "STRING"), ("n", "INT")], "primary_keys": ["id"],
              "partition_keys": [], "options": {**OPTIONS, "file-index.bloom-filter.v.items": "100"}}
    done = java.run([Write(path, [{"id": k, "v": v, "n": n} for k, v, n in BATCHES[0]], create=create),
                     Write(path, [{"id": k, "v": v, "n": n} for k, v, n in BATCHES[1]])])
    assert not [d for d in done if isinstance(d, Exception)], done
    table = FileStoreTable.open(path)
    splits = table.plan(batch_read=True).splits
    files = [(s, f) for s in splits for f in s.files]
    assert all(f.embedded_index is not None for _, f in files)  # Java's, small enough for the meta
    for condition, column, value in ((Condition("n", (7,)), "n", 7), (Condition("v", ("v5",)), "v", "v5")):
        reader = TableRead(table.io, table.path, table.schema, conditions=[condition])
        kept = [f for s, f in files if reader.may_match(s, f)]
        assert 0 < len(kept) < len(files), condition
        want = [r for r in _model() if r[column] == value]
        got = [r for s in splits for r in reader.read_split(s).to_pylist() if r[column] == value]
        assert sorted(got, key=lambda r: r["id"]) == want
        df = spark.read.format("paimon").load(path).where(f"{column} = {value!r}")
        assert sorted((r.asDict() for r in df.collect()), key=lambda r: r["id"]) == want


def test_an_append_tables_indexes_serve_javas_filtered_reads_and_ours(spark, java, warehouse):
    """Append tables are where Paimon uses file indexes most: every file read unmerged, at plan time by
    its embedded index and at read time by its bitmap's rows."""
    from dbt_paimon.engine import write

    path = f"{warehouse}/db.db/indexed_append"
    options = {"file-index.bitmap.columns": "n", "file-index.bloom-filter.columns": "v",
               "file-index.bloom-filter.v.items": "50"}
    batches = [[(k, f"v{k}", k % 4) for k in range(20)], [(k, f"w{k}", 9) for k in range(5)]]
    for batch in batches:
        write(spark.createDataFrame(batch, SPARK), path, options=options, settings=RunSettings(execution="local"))
    every = [{"id": k, "v": v, "n": n} for batch in batches for k, v, n in batch]
    results = java.run([Read(path, equal={"n": 9}), Read(path, equal={"n": 2}), Read(path, equal={"v": "w3"})])
    key = lambda r: (r["id"], r["v"])  # noqa: E731
    assert sorted(rows(results[0], ["id", "v"]), key=key) == sorted([r for r in every if r["n"] == 9], key=key)
    assert sorted(rows(results[1], ["id", "v"]), key=key) == sorted([r for r in every if r["n"] == 2], key=key)
    assert {"id": 3, "v": "w3", "n": 9} in rows(results[2], ["id", "v"])
    table = FileStoreTable.open(path)
    splits = table.plan().splits
    reader = TableRead(table.io, table.path, table.schema, conditions=[Condition("n", (9,))])
    assert sum(reader.may_match(s, f) for s in splits for f in s.files) == 1  # only the second write's file
    df = spark.read.format("paimon").load(path).where("n = 9")
    assert sorted((r.asDict() for r in df.collect()), key=key) == sorted([r for r in every if r["n"] == 9], key=key)
