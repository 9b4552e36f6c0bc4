"""Nested value columns (ARRAY, MAP, ROW, nested in one another) in Paimon primary-key tables: a
model's upserts, read by Spark's `paimon` source, our reader, pypaimon and Java Paimon alike; a table
Java made with nested columns read and continued; what Paimon refuses about them, refused."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pytest

from dbt_paimon.engine import upsert
from dbt_paimon.engine.writes import append
from dbt_paimon.engine.settings import RunSettings
from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.common.errors import DataError, PaimonError, SchemaError
from tests.oracle import pypaimon_read, rows

from .javapaimon import Read, Write, assert_same

SPARK_SCHEMA = ("id bigint, dt string, tags array<string>, attrs map<string,bigint>, "
                "addr struct<city:string,zip:int>, hist array<struct<at:date,n:decimal(10,2)>>")
COLUMNS = ["id", "dt", "tags", "attrs", "addr", "hist"]


def _row(k: int, version: int) -> dict:
    """A row in Arrow's Python form (a map as [(key, value)], a struct as a dict): nulls and empty
    values at every level, by key."""
    kind = (k + version) % 5
    return {
        "id": k, "dt": "ab"[(k + version) % 2],  # half of the keys move partition at each version
        "tags": None if kind == 0 else [] if kind == 1 else [f"t{version}", None, f"k{k}"][: kind],
        "attrs": None if kind == 1 else [] if kind == 2 else [("a", k), ("b", None), (f"v{version}", version)][: kind],
        # a null struct and a struct of nulls are apart (Paimon 2.0 keeps them apart; 0.9 did not)
        "addr": None if kind == 2 else {"city": None, "zip": None} if kind == 4 else
        {"city": None if kind == 3 else f"c{k}", "zip": version},
        "hist": None if kind == 3 else [None, {"at": dt.date(2026, 1, 1 + version), "n": Decimal(f"{k}.{version:02d}")},
                                        {"at": None, "n": None}][: kind + 1],
    }


def _frame(spark, batch: list[dict]):
    def spark_value(r, c):
        v = r[c]
        if c == "attrs" and v is not None:
            return dict(v)
        return v
    return spark.createDataFrame([tuple(spark_value(r, c) for c in COLUMNS) for r in batch], SPARK_SCHEMA)


def _spark_rows(spark, path) -> list[dict]:
    """Spark's rows in Arrow's Python form."""
    out = []
    for r in spark.read.format("paimon").load(path).collect():
        d = r.asDict(recursive=True)
        d["attrs"] = None if d["attrs"] is None else list(d["attrs"].items())
        out.append(d)
    return sorted(out, key=lambda r: r["id"])


@pytest.mark.parametrize("execution", ["local", "distributed"])
def test_a_models_nested_columns_are_upserted_and_every_reader_reads_them_alike(spark, java, warehouse, execution):
    path = f"{warehouse}/db.db/nested_{execution}"
    model: dict[int, dict] = {}
    for version, keys in enumerate([range(0, 12), range(6, 18)]):
        batch = [_row(k, version) for k in keys]
        result = upsert(_frame(spark, batch), path, primary_keys="id", partition_keys="dt",
                        settings=RunSettings(execution=execution))
        model.update({r["id"]: r for r in batch})
        assert result.inserted == (12 if version == 0 else 6)
    expected = [model[k] for k in sorted(model)]
    table = FileStoreTable.open(path)
    assert sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"]) == expected
    assert _spark_rows(spark, path) == expected
    assert rows(pypaimon_read(path), "id") == expected
    java_read, = java.run([Read(path)])
    assert_same(java_read, table.to_arrow(), ["id"], expected)
    # the schema file holds the nested types as Java writes them, ROW fields numbered in the column id space
    stored = json.loads(open(f"{path}/schema/schema-0").read())
    by_name = {f["name"]: f for f in stored["fields"]}
    assert by_name["tags"]["type"] == {"type": "ARRAY", "element": "STRING"}
    assert by_name["attrs"]["type"] == {"type": "MAP", "key": "STRING NOT NULL", "value": "BIGINT"}
    assert [(f["id"], f["name"]) for f in by_name["addr"]["type"]["fields"]] == [(5, "city"), (6, "zip")]
    assert [f["name"] for f in by_name["hist"]["type"]["element"]["fields"]] == ["at", "n"]
    assert stored["highestFieldId"] == 9  # id 0, dt 1, tags 2, attrs 3, addr 4 (5, 6), hist 7 (8, 9)


JAVA_FIELDS = [("k", "INT NOT NULL"), ("scores", {"type": "ARRAY", "element": "INT NOT NULL"}),
               ("ids", {"type": "MAP", "key": "INT NOT NULL", "value": "STRING"}),
               ("meta", {"type": "ROW", "fields": [
                   {"id": 0, "name": "label", "type": "STRING"},
                   {"id": 1, "name": "inner", "type": {"type": "ROW", "fields": [
                       {"id": 2, "name": "ts", "type": "TIMESTAMP(6)"}]}}]}),
               ("v", "BIGINT")]


def _java_row(k: int, version: int) -> dict:
    return {"k": k, "scores": None if k % 4 == 0 else [k, version, k * version],
            "ids": None if k % 4 == 1 else [(k, f"s{version}"), (k + 100, None)],
            "meta": None if k % 4 == 2 else {"label": f"l{version}", "inner": None if k % 3 == 0 else
                                              {"ts": dt.datetime(2026, 5, 1 + version, k % 24, 0, 0, 123456)}},
            "v": k * 10 + version}


def test_a_nested_table_java_made_is_read_and_continued(java, warehouse):
    """Java's nested types as they are: NOT NULL elements, an INT map key, a ROW in a ROW; our rows go
    into them and Java reads both writers' rows merged."""
    path = f"{warehouse}/db.db/java_nested"
    create = {"fields": JAVA_FIELDS, "primary_keys": ["k"], "partition_keys": [], "options": {"bucket": "2"}}
    first = [_java_row(k, 0) for k in range(10)]
    done = java.run([Write(path, first, create), Read(path)])
    table = FileStoreTable.open(path)
    assert_same(done[1], table.to_arrow(), ["k"], first)
    scores = table.schema.field("scores").type
    assert scores.element.nullable is False and table.schema.field("ids").type.key.root == "INT"
    ours = [_java_row(k, 1) for k in range(5, 15)]
    write = table.new_write()
    write.write(pa.Table.from_pylist(ours, table.schema.arrow_schema()))
    write.commit()
    merged = {r["k"]: r for r in first} | {r["k"]: r for r in ours}
    expected = [merged[k] for k in sorted(merged)]
    table = FileStoreTable.open(path)
    read, = java.run([Read(path)])
    assert_same(read, table.to_arrow(), ["k"], expected)
    assert rows(pypaimon_read(path), "k") == expected
    assert table.schema.highest_field_id == json.loads(open(f"{path}/schema/schema-0").read())["highestFieldId"]


def test_a_null_where_the_table_says_not_null_is_refused_and_nothing_is_committed(java, warehouse):
    path = f"{warehouse}/db.db/java_not_null_element"
    create = {"fields": JAVA_FIELDS, "primary_keys": ["k"], "partition_keys": [], "options": {"bucket": "1"}}
    java.run([Write(path, [_java_row(1, 0)], create)])
    table = FileStoreTable.open(path)
    before = table.latest_snapshot().id
    bad = pa.Table.from_pylist([{**_java_row(2, 1), "scores": [1, None]}], table.schema.arrow_schema())
    write = table.new_write()
    with pytest.raises(DataError, match="column 'scores': its elements are NOT NULL but 1 of them are null"):
        write.write(bad)
    assert FileStoreTable.open(path).latest_snapshot().id == before


NESTED_ARROW = pa.schema([pa.field("id", pa.int64(), False), ("tags", pa.list_(pa.string())),
                          ("addr", pa.struct([("city", pa.string())])), ("v", pa.int64())])


@pytest.mark.parametrize("spec, message", [
    ({"primary_keys": ["id", "tags"]}, "primary key field cannot be of a nested type"),
    ({"partition_keys": ["addr"]}, "partition field cannot be of a nested type"),
    ({"options": {"bucket": "2", "bucket-key": "tags"}}, "bucket-key"),
    ({"options": {"merge-engine": "aggregation", "fields.tags.aggregate-function": "max"}},
     "aggregate function 'max' needs an atomic type"),
    ({"options": {"merge-engine": "aggregation", "fields.addr.aggregate-function": "collect"}},
     "aggregate function 'collect' needs ARRAY"),
    ({"options": {"merge-engine": "aggregation", "fields.tags.aggregate-function": "collect",
                  "fields.tags.distinct": "true"}}, "needs no 'distinct'"),
    ({"options": {"merge-engine": "aggregation", "fields.tags.aggregate-function": "merge_map"}},
     "aggregate function 'merge_map' needs MAP"),
], ids=["key", "partition", "bucket-key", "max", "collect-row", "collect-distinct", "merge-map-array"])
def test_what_paimon_refuses_of_nested_columns_is_refused_by_name(tmp_path, spec, message):
    with pytest.raises(SchemaError, match=message):
        FileStoreTable.create(str(tmp_path / "t"), NESTED_ARROW, spec.get("primary_keys", ["id"]),
                              partition_keys=spec.get("partition_keys", ()), options=spec.get("options"))
    assert not (tmp_path / "t" / "schema").exists()


def test_a_nested_aggregation_keeps_the_last_value_whole(tmp_path):
    """Without a function of its own a nested column of an aggregation table takes Paimon's default,
    last_non_null_value: the last non-null value of the key, whole."""
    table = FileStoreTable.create(str(tmp_path / "t"), NESTED_ARROW, ["id"],
                                  options={"bucket": "1", "merge-engine": "aggregation",
                                           "fields.v.aggregate-function": "sum"})
    for batch in ([{"id": 1, "tags": ["a"], "addr": {"city": "x"}, "v": 1}],
                  [{"id": 1, "tags": None, "addr": {"city": None}, "v": 2}]):
        write = table.new_write()
        write.write(pa.Table.from_pylist(batch, NESTED_ARROW))
        write.commit()
        table = FileStoreTable.open(table.path)
    assert table.to_arrow().to_pylist() == [{"id": 1, "tags": ["a"], "addr": {"city": None}, "v": 3}]


def test_an_append_models_nested_columns_are_read_alike(spark, java, warehouse):
    """A model without unique_key: a Paimon append table, its nested rows kept as given."""
    path = f"{warehouse}/db.db/nested_append"
    batches = [[_row(k, v) for k in range(6)] for v in range(2)]
    for batch, execution in zip(batches, ["local", "distributed"]):
        append.write(_frame(spark, batch), path, settings=RunSettings(execution=execution))
    def ordered(rows_):  # a key's two rows have other dt values
        return sorted(rows_, key=lambda r: (r["id"], r["dt"]))
    expected = ordered(r for batch in batches for r in batch)
    table = FileStoreTable.open(path)
    assert table.schema.is_append
    assert ordered(table.to_arrow().to_pylist()) == expected
    assert ordered(_spark_rows(spark, path)) == expected
    java_read, = java.run([Read(path)])
    assert ordered(java_read.to_pylist()) == expected


AGG_FIELDS = [("k", "INT NOT NULL"), ("events", {"type": "ARRAY", "element": "STRING"}),
              ("seen", {"type": "MAP", "key": "STRING NOT NULL", "value": "INT"}), ("n", "BIGINT")]
AGG_OPTIONS = {"bucket": "1", "merge-engine": "aggregation", "write-only": "true",
               "fields.events.aggregate-function": "collect", "fields.seen.aggregate-function": "merge_map",
               "fields.n.aggregate-function": "sum"}


def _agg_history(rng) -> list[dict]:
    def events():
        return rng.choice([None, [], [rng.choice("abc")], [rng.choice("abc"), None, "d"]])

    def seen():
        return rng.choice([None, [], [(rng.choice("xyz"), rng.randrange(5))], [("x", None), ("w", rng.randrange(5))]])
    return [{"k": k, "events": events(), "seen": seen(), "n": rng.randrange(10)} for k in rng.sample(range(12), 8)]


def _unordered_maps(rows_: list[dict]) -> list[dict]:
    """Rows with each map as a sorted list: Java returns a merged map in its HashMap's order."""
    return [{**r, "seen": None if r["seen"] is None else sorted(r["seen"], key=repr)} for r in rows_]


def test_collect_and_merge_map_merge_as_java_merges_them(java, warehouse):
    """Random histories of arrays and maps (null, empty, null elements and values) written by Java, then by
    us, then compacted by us: Java's read and ours agree after each step."""
    import random

    from dbt_paimon.store.compaction.compact import compact_bucket

    path = f"{warehouse}/db.db/nested_agg"
    rng = random.Random(41)
    create = {"fields": AGG_FIELDS, "primary_keys": ["k"], "partition_keys": [], "options": AGG_OPTIONS}
    commits = [_agg_history(rng) for _ in range(3)]
    done = java.run([Write(path, commits[0], create)] + [Write(path, c) for c in commits[1:]] + [Read(path)])
    table = FileStoreTable.open(path)
    assert len(table.plan().splits[0].files) == 3
    assert done[3].num_rows == 12 or done[3].num_rows > 6
    assert _unordered_maps(rows(done[3], "k")) == _unordered_maps(rows(table.to_arrow(), "k"))
    assert any(len(r["events"] or []) > 3 for r in done[3].to_pylist())  # arrays of several versions
    for _ in range(2):
        write = table.new_write()
        write.write(pa.Table.from_pylist(_agg_history(rng), table.schema.arrow_schema()))
        write.commit()
        table = FileStoreTable.open(path)
    ours, = java.run([Read(path)])
    assert _unordered_maps(rows(ours, "k")) == _unordered_maps(rows(table.to_arrow(), "k"))
    [split] = table.plan().splits
    table.new_commit().commit(compact_bucket(table, split), "COMPACT")
    compacted, = java.run([Read(path)])
    assert _unordered_maps(rows(compacted, "k")) == _unordered_maps(rows(FileStoreTable.open(path).to_arrow(), "k"))
    assert _unordered_maps(rows(compacted, "k")) == _unordered_maps(rows(ours, "k"))


def test_what_nested_values_are_refused_in_other_roles(spark, tmp_path):
    """A nested column as sequence_by, sequence-group or rowkind field, merge_map of BYTES keys: refused
    by name; a nested field another writer changed is refused on read, never matched by name."""
    path = str(tmp_path / "roles")
    batch = _frame(spark, [_row(1, 0)])
    with pytest.raises(SchemaError, match="sequence_by column 'addr' is ROW"):
        upsert(batch, path, primary_keys="id", sequence_by="addr")
    for options, words in (({"merge-engine": "partial-update", "fields.addr.sequence-group": "tags"},
                            "a sequence field cannot be of a nested type"),
                           ({"rowkind.field": "tags"}, "a rowkind field cannot be of a nested type")):
        with pytest.raises(SchemaError, match=words):
            FileStoreTable.create(path, NESTED_ARROW.append(pa.field("addr2", pa.string())), ["id"], options=options)
    binary = pa.schema([pa.field("id", pa.int64(), False), ("m", pa.map_(pa.binary(), pa.int64()))])
    with pytest.raises(SchemaError, match="needs MAP .with an atomic key type other than BYTES"):
        FileStoreTable.create(path, binary, ["id"], options={"merge-engine": "aggregation",
                                                           "fields.m.aggregate-function": "merge_map"})
    # a ROW field renamed in a later schema, as another writer's ALTER TABLE would do it
    table = FileStoreTable.create(path, NESTED_ARROW, ["id"], options={"bucket": "1"})
    write = table.new_write()
    write.write(pa.Table.from_pylist([{"id": 1, "tags": ["a"], "addr": {"city": "x"}, "v": 1}], NESTED_ARROW))
    write.commit()
    doc = json.loads(open(f"{path}/schema/schema-0").read())
    addr = next(f for f in doc["fields"] if f["name"] == "addr")
    addr["type"]["fields"][0]["name"] = "town"
    doc["id"] = 1
    with open(f"{path}/schema/schema-1", "w") as f:
        f.write(json.dumps(doc))
    with pytest.raises(PaimonError, match="column 'addr' .* another writer changed the fields of a nested column"):
        FileStoreTable.open(path).to_arrow()


def test_spark_sql_matches_struct_fields_by_name_or_refuses(spark, warehouse):
    """UPDATE and MERGE with a struct whose fields are given in another order are refused, not written by
    position; NULL fits a nested column."""
    import os

    from dbt_paimon.sql import register

    os.makedirs(f"{warehouse}/db.db", exist_ok=True)
    upsert(spark.sql("SELECT 1L AS id, named_struct('lat', 1.0D, 'lon', 2.0D) AS loc, array(1) AS a"),
           f"{warehouse}/db.db/geo", primary_keys="id", settings=RunSettings(execution="local"))
    register(spark, warehouse=warehouse)
    with pytest.raises(Exception, match="column 'loc' is ROW<`lat` DOUBLE, `lon` DOUBLE>, and the statement gives it"):
        spark.sql("UPDATE db.geo SET loc = named_struct('lon', 5.0D, 'lat', 6.0D) WHERE id = 1")
    with pytest.raises(Exception, match="column 'loc' is ROW<`lat` DOUBLE, `lon` DOUBLE>, and the statement gives it"):
        spark.sql("MERGE INTO db.geo t USING (SELECT 1L AS id, named_struct('lon', 1.0D, 'lat', 2.0D) AS loc) s "
                  "ON t.id = s.id WHEN MATCHED THEN UPDATE SET loc = s.loc")
    spark.sql("UPDATE db.geo SET loc = named_struct('lat', 6.0D, 'lon', 5.0D), a = NULL WHERE id = 1")
    assert [r.asDict(recursive=True) for r in spark.sql("SELECT * FROM db.geo").collect()] == [
        {"id": 1, "loc": {"lat": 6.0, "lon": 5.0}, "a": None}]


def test_spark_sql_reads_nested_tables_through_the_catalog(spark, java, warehouse):
    """The catalog entry of a Java table with NOT NULL elements and a ROW in a ROW, and of one whose struct
    field names need quoting: Spark SQL reads both (a read's nested children are declared nullable)."""
    from dbt_paimon.sql import register

    create = {"fields": JAVA_FIELDS, "primary_keys": ["k"], "partition_keys": [], "options": {"bucket": "1"}}
    rows_ = [_java_row(k, 0) for k in range(4)]
    java.run([Write(f"{warehouse}/db.db/java_catalog", rows_, create)])
    upsert(spark.sql("SELECT 1L AS id, named_struct('first name', 'ann', 'a:b', 1) AS who"),
           f"{warehouse}/db.db/odd_names", primary_keys="id", settings=RunSettings(execution="local"))
    register(spark, warehouse=warehouse)
    got = [r.asDict(recursive=True)
           for r in spark.sql("SELECT k, scores, ids, meta FROM db.java_catalog ORDER BY k").collect()]
    assert [(r["k"], r["scores"], r["meta"]) for r in got] == [(r["k"], r["scores"], r["meta"]) for r in rows_]
    assert [r["ids"] for r in got] == [None if r["ids"] is None else dict(r["ids"]) for r in rows_]
    odd = spark.sql("SELECT who.`first name` AS n, who.`a:b` AS ab FROM db.odd_names").collect()
    assert [tuple(r) for r in odd] == [("ann", 1)]


@pytest.mark.parametrize("execution", ["local", "distributed"])
def test_a_model_upserts_into_java_struct_fields_that_are_not_null(spark, java, warehouse, execution):
    """Arrow casts no struct to one with a NOT NULL field, even without a null: the model's structs reach
    Java's ROW<x INT NOT NULL, ...> through a cast to its nullable form, viewed as the column's type."""
    path = f"{warehouse}/db.db/strict_{execution}"
    fields = [("id", "BIGINT NOT NULL"), ("pt", {"type": "ROW", "fields": [
        {"id": 0, "name": "x", "type": "INT NOT NULL"}, {"id": 1, "name": "y", "type": "STRING"}]}),
        ("xs", {"type": "ARRAY", "element": {"type": "ROW NOT NULL", "fields": [
            {"id": 2, "name": "z", "type": "BIGINT NOT NULL"}]}})]
    java.run([Write(path, [{"id": 1, "pt": {"x": 1, "y": "a"}, "xs": [{"z": 1}]}],
                    {"fields": fields, "primary_keys": ["id"], "partition_keys": [], "options": {"bucket": "1"}})])
    # y is NOT NULL in the model, nullable in the table: the model's column is cast, and Spark's cast
    # to a struct type makes every field nullable
    model = spark.sql("SELECT 2L AS id, named_struct('x', 2, 'y', 'b') AS pt, array(named_struct('z', 5L)) AS xs")
    upsert(model, path, primary_keys="id", settings=RunSettings(execution=execution))
    expected = [{"id": 1, "pt": {"x": 1, "y": "a"}, "xs": [{"z": 1}]},
                {"id": 2, "pt": {"x": 2, "y": "b"}, "xs": [{"z": 5}]}]
    read, = java.run([Read(path)])
    assert_same(read, FileStoreTable.open(path).to_arrow(), ["id"], expected)
