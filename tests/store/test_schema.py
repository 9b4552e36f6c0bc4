"""Creating and opening tables: schema-0 JSON as Paimon writes it, and Paimon's validation rules."""

import json
import os

import pyarrow as pa
import pytest

from dbt_paimon.store import CorruptTableError, FileStoreTable, SchemaError, TableNotFoundError
from tests.oracle import pypaimon_table

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("dt", pa.string()),
                    ("amount", pa.decimal128(12, 2)), ("ts", pa.timestamp("us")), ("tz", pa.timestamp("us", "UTC"))])


def test_schema_file_is_paimon_json(table_path):
    FileStoreTable.create(table_path, SCHEMA, ["id"], ["dt"], {"bucket": "-1", "dynamic-bucket.target-row-num": 100})
    doc = json.load(open(os.path.join(table_path, "schema", "schema-0")))
    assert doc["version"] == 3 and doc["id"] == 0 and doc["highestFieldId"] == 5
    assert [f["type"] for f in doc["fields"]] == [
        "BIGINT NOT NULL", "STRING", "STRING", "DECIMAL(12, 2)", "TIMESTAMP(6)", "TIMESTAMP(6) WITH LOCAL TIME ZONE"]
    assert doc["primaryKeys"] == ["id"] and doc["partitionKeys"] == ["dt"]
    assert doc["options"] == {"bucket": "-1", "dynamic-bucket.target-row-num": "100"}
    # pypaimon understands it, including the cross-partition mode it implies
    pt = pypaimon_table(table_path)
    assert pt.primary_keys == ["id"] and pt.partition_keys == ["dt"]
    assert FileStoreTable.open(table_path).schema.bucket_mode == "KEY_DYNAMIC"


def test_bucket_modes_follow_paimon_rules(warehouse):
    p = lambda n: os.path.join(warehouse, "db.db", n)  # noqa: E731
    assert FileStoreTable.create(p("a"), SCHEMA, ["id"], ["dt"], {"bucket": "4"}).schema.bucket_mode == "HASH_FIXED"
    assert FileStoreTable.create(p("b"), SCHEMA, ["id", "dt"], ["dt"]).schema.bucket_mode == "HASH_DYNAMIC"
    assert FileStoreTable.create(p("c"), SCHEMA, ["id"], ["dt"]).schema.bucket_mode == "KEY_DYNAMIC"


@pytest.mark.parametrize("pk,parts,options,message", [
    (["id"], [], {"bucket": "-1", "no.such.option": "1"}, "unknown table option 'no.such.option'"),
    (["id"], [], {"changelog-producer": "full-compaction", "deletion-vectors.enabled": "true"},
     "only supports 'none', 'input' and 'lookup' changelog-producer with deletion vectors"),
    (["nope"], [], {}, "primary key column(s) ['nope'] are not columns"),
    (["id"], ["nope"], {}, "partition key column(s) ['nope'] are not columns"),
    ([], [], {"merge-engine": "aggregation"}, "need a primary key"),  # an append table (no key) takes none
    (["dt"], ["dt"], {}, "must not equal the partition keys"),
    (["id"], [], {"bucket": "0"}, "option 'bucket' must be -1"),
    (["id"], ["dt"], {"bucket": "-2"}, "lacks partition field(s) ['dt']"),  # postpone: no cross-partition
    ([], [], {"bucket": "-2"}, "needs a primary key"),
    (["id"], [], {"bucket": "-2", "postpone.default-bucket-num": "0"}, "must be a positive integer"),
    (["id"], [], {"bucket": "-3"}, "option 'bucket' must be -1"),
    (["id"], [], {"bucket": "many"}, "option 'bucket' must be an integer"),
    (["id"], [], {"bucket": "-1", "bucket-key": "id"}, "'bucket-key' cannot be used with bucket = -1"),
    (["id"], [], {"bucket": "2", "bucket-key": "name"}, "must be a subset of the primary key"),
    (["id"], [], {"merge-engine": "latest"}, "option 'merge-engine' must be one of"),
    (["id"], [], {"fields.ghost.aggregate-function": "sum"}, "names column 'ghost'"),
    (["id"], [], {"fields.amount.aggregate-function": "median"}, "unknown aggregate function 'median'"),
    (["id"], [], {"target-file-size": "big"}, "must be a size"),
    (["id"], ["dt"], {"sequence.field": "ts"}, "'sequence.field' is not allowed on a cross-partition table"),
    (["id"], [], {"sequence.field": "ghost"}, "names column(s) ['ghost']"),
    (["id"], [], {"sequence.field": "amount,amount"}, "names ['amount'] more than once"),
    (["id"], [], {"sequence.field": "amount", "merge-engine": "first-row"},
     "cannot be used with merge-engine 'first-row'"),
    (["id"], [], {"sequence.field": "amount", "merge-engine": "aggregation", "fields.amount.aggregate-function": "sum"},
     "sequence field(s) ['amount'] must not have an aggregate function"),
    (["id"], [], {"sequence.field": "amount", "sequence.field.sort-order": "newest"},
     "option 'sequence.field.sort-order' must be ascending or descending, got 'newest'"),
    (["id"], [], {"sequence.field": "amount,,name"}, "'amount,,name' names an empty column"),
    ([], [], {"sequence.field.sort-order": "descending"}, "need a primary key"),
    (["id"], [], {"merge-engine": "aggregation", "fields.name.aggregate-function": "sum"},
     "aggregate function 'sum' needs a numeric type"),
])
def test_invalid_tables_are_refused_and_nothing_is_created(table_path, pk, parts, options, message):
    with pytest.raises(SchemaError) as e:
        FileStoreTable.create(table_path, SCHEMA, pk, parts, options)
    assert message in str(e.value)
    assert not os.path.exists(table_path)


def test_reserved_and_unsupported_columns(table_path):
    with pytest.raises(SchemaError, match="reserved"):
        FileStoreTable.create(table_path, pa.schema([("id", pa.int64()), ("_KEY_id", pa.int64())]), ["id"])
    with pytest.raises(SchemaError, match="column 'at' has Arrow type time64"):
        FileStoreTable.create(table_path, pa.schema([("id", pa.int64()), ("at", pa.time64("us"))]), ["id"])
    with pytest.raises(SchemaError, match=r"column 'tags element' has Arrow type dictionary"):
        FileStoreTable.create(table_path, pa.schema([("id", pa.int64()),
                                                     ("tags", pa.list_(pa.dictionary(pa.int8(), pa.string())))]),
                              ["id"])
    with pytest.raises(SchemaError, match="partition column 'b' is BYTES"):
        FileStoreTable.create(table_path, pa.schema([("id", pa.int64()), ("b", pa.binary())]), ["id"], ["b"])
    assert not os.path.exists(table_path)


def test_existing_table_is_not_overwritten(table_path):
    FileStoreTable.create(table_path, SCHEMA, ["id"])
    with pytest.raises(SchemaError, match="already exists"):
        FileStoreTable.create(table_path, SCHEMA, ["id"])


def test_opening_something_that_is_not_a_table(tmp_path):
    with pytest.raises(TableNotFoundError, match="does not exist"):
        FileStoreTable.open(str(tmp_path / "missing"))
    (tmp_path / "plain").mkdir()
    with pytest.raises(TableNotFoundError, match="is not a Paimon table"):
        FileStoreTable.open(str(tmp_path / "plain"))


@pytest.mark.parametrize("edit,message", [
    (lambda d: d.update(version=9), "schema version 9"),
    (lambda d: d["fields"][1].update(type={"type": "MULTISET", "element": "INT"}),
     "column 'name': unsupported Paimon type .*MULTISET"),
    (lambda d: d["fields"][1].update(type={"type": "ROW", "fields": [{"name": "x", "type": "INT"}]}),
     "column 'name': Paimon type .* lacks or mistypes 'id'"),
    (lambda d: d["fields"][1].update(type="GEOMETRY"), "unsupported Paimon type 'GEOMETRY'"),
    (lambda d: d.pop("fields"), "lacks the field 'fields'"),
])
def test_unsupported_schema_files_get_clear_errors(table_path, edit, message):
    FileStoreTable.create(table_path, SCHEMA, ["id"])
    path = os.path.join(table_path, "schema", "schema-0")
    doc = json.load(open(path))
    edit(doc)
    open(path, "w").write(json.dumps(doc))
    with pytest.raises((CorruptTableError, SchemaError), match=message):
        FileStoreTable.open(table_path)


def test_sequence_sort_order_ignores_case_as_paimon_does(table_path):
    table = FileStoreTable.create(table_path, SCHEMA, ["id"], [], {"sequence.field": "amount",
                                                                   "sequence.field.sort-order": "DESCENDING"})
    assert table.schema.core.sequence_fields == ["amount"] and not table.schema.core.sequence_ascending
