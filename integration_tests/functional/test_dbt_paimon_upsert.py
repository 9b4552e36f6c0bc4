"""The paimon_upsert materialization end to end through dbt, on the dbt-tests-adapter fixtures:
what each run reports, what the table holds (read by Spark SQL and by pypaimon), hooks, docs,
warnings, full refresh, and bad runs that must leave the table exactly as it was."""

import json
import os

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

import pyarrow as pa

from dbt_paimon.key_index import KeyIndex
from dbt_paimon.store import FileStoreTable
from tests.oracle import pypaimon_read, rows

CUSTOMERS_SQL = """
{{ config(
    materialized='paimon_upsert',
    unique_key='id',
    partition_by='dt',
    options={'rowkind.field': 'op'},
    pre_hook="create table if not exists {{ target.schema }}.hook_log (model string, batch int, n bigint) \
using parquet",
    post_hook="insert into {{ target.schema }}.hook_log select '{{ this.identifier }}', {{ var('batch') }}, \
count(*) from {{ this }}",
    persist_docs={'relation': true, 'columns': true},
) }}
{% set batches = {
    1: "(1, 'a', 'ann', 10, '+I'), (2, 'a', 'bob', 20, '+I'), (3, 'b', 'cid', 30, '+I')",
    2: "(2, 'b', 'bob', 21, '+I'), (3, 'b', 'cid', 31, '+I'), (4, 'c', 'dee', 40, '+I'), (1, 'c', 'ann', 11, '+I')",
    3: "(4, 'c', 'dee', 40, '-D'), (5, 'a', 'eve', 50, '+I'), (1, 'a', 'ann', 12, '+I')",
} %}
with src as (
    select * from values {{ batches[var('batch')] }} as src(id, dt, name, v, op)
)
select
    s.id, s.dt, s.name, s.v, s.op,
    {% if is_incremental() %} t.v {% else %} cast(null as int) {% endif %} as previous_v,
    {{ is_incremental() }} as loaded_incrementally
from src s
{% if is_incremental() %}
left join {{ this }} t on t.id = s.id   -- {{ this }} is the Paimon table itself
{% endif %}
"""

DOWNSTREAM_SQL = """
select dt, count(*) as customers, sum(v) as v from {{ ref('customers') }} group by dt
"""

SCHEMA_YML = """
version: 2
models:
  - name: customers
    description: "Customers, one row each"
    columns:
      - name: id
        description: "The customer id"
        data_tests: [unique, not_null]
      - name: dt
        description: "Partition"
        data_tests:
          - accepted_values:
              arguments:
                values: ['a', 'b', 'c']
"""

UNSUPPORTED_SQL = """
{{ config(materialized='paimon_upsert', unique_key='id', file_format='delta', tblproperties={'k': 'v'}) }}
select 1 as id, 'x' as name
"""


def _results(project):
    with open(os.path.join(project.project_root, "target", "run_results.json")) as f:
        return {r["unique_id"].split(".")[-1]: r for r in json.load(f)["results"]}


def _rows(project, relation, order="id"):
    rows = project.run_sql(f"select * from {project.test_schema}.{relation} order by {order}", fetch="all")
    return [tuple(r) for r in rows]


class TestPaimonUpsertModel:
    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": CUSTOMERS_SQL, "downstream.sql": DOWNSTREAM_SQL, "schema.yml": SCHEMA_YML,
                "unsupported.sql": UNSUPPORTED_SQL}

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"vars": {"batch": 1}}

    def _run(self, project, batch, *extra):
        results = run_dbt(["run", "--select", "customers", "downstream", "--vars", f"batch: {batch}", *extra])
        assert len(results) == 2
        return _results(project)["customers"]

    def test_runs_move_keys_read_this_and_report_counts(self, project):
        path = project.adapter.paimon_table_path(project.adapter.Relation.create(
            schema=project.test_schema, identifier="customers"))

        first = self._run(project, 1)
        assert first["message"] == "UPSERT 3: 3 inserted, 0 updated"
        response = first["adapter_response"]
        assert response["rows_affected"] == 3 and response["snapshot_id"] == 1 and response["code"] == "UPSERT"
        assert response["execution"] == "local"  # a local master and a tiny model: the driver-local job
        assert _rows(project, "customers") == [
            (1, "a", "ann", 10, "+I", None, False), (2, "a", "bob", 20, "+I", None, False),
            (3, "b", "cid", 30, "+I", None, False)]

        second = self._run(project, 2)
        assert second["message"] == "UPSERT 4: 1 inserted, 1 updated, 2 moved"
        assert second["adapter_response"]["rows_affected"] == 4
        assert second["adapter_response"]["moved"] == 2
        assert second["adapter_response"]["bootstrap"] == "key index"  # a cross-partition table (bucket -1)
        phases = second["adapter_response"]["phases"]  # where the upsert's time went
        assert {"prepare", "collect", "plan", "job", "commit", "index_record"} <= set(phases)
        assert all(isinstance(v, float) and v >= 0 for v in phases.values())
        # is_incremental() was true and {{ this }} gave the stored values
        assert _rows(project, "customers") == [
            (1, "c", "ann", 11, "+I", 10, True), (2, "b", "bob", 21, "+I", 20, True),
            (3, "b", "cid", 31, "+I", 30, True), (4, "c", "dee", 40, "+I", None, True)]
        assert _rows(project, "downstream", order="dt") == [("b", 2, 52), ("c", 2, 51)]

        third = self._run(project, 3)
        assert third["message"] == "UPSERT 3: 1 inserted, 0 updated, 1 moved, 1 deleted"
        expected = [(1, "a", "ann", 12, "+I", 11, True), (2, "b", "bob", 21, "+I", 20, True),
                    (3, "b", "cid", 31, "+I", 30, True), (5, "a", "eve", 50, "+I", None, True)]
        assert _rows(project, "customers") == expected
        # pypaimon reads what dbt wrote: the same rows, three snapshots
        names = ["id", "dt", "name", "v", "op", "previous_v", "loaded_incrementally"]
        read = pypaimon_read(path).sort_by("id").to_pylist()
        assert [tuple(r[n] for n in names) for r in read] == expected
        assert FileStoreTable.open(path).latest_snapshot().id >= third["adapter_response"]["snapshot_id"] == 3

        # hooks ran on every run, the post-hook reading the table it follows
        assert _rows(project, "hook_log", order="batch") == [("customers", 1, 3), ("customers", 2, 4),
                                                             ("customers", 3, 4)]

        # dbt test, dbt show and docs through the same paimon source
        run_dbt(["test", "--select", "customers", "--vars", "batch: 3"])
        shown = run_dbt(["show", "--inline", "select id, dt from {{ ref('customers') }} order by id"])
        assert [tuple(r) for r in shown.results[0].agate_table.rows] == [(1, "a"), (2, "b"), (3, "b"), (5, "a")]

        # persist_docs: into the Paimon schema (pypaimon sees it) and so into Spark's catalog
        schema = FileStoreTable.open(path).schema
        assert schema.comment == "Customers, one row each"
        assert schema.field("id").description == "The customer id"
        catalog = run_dbt(["docs", "generate", "--vars", "batch: 3"])
        node = catalog.nodes["model.test.customers"]
        assert node.metadata.type == "table" and node.metadata.comment == "Customers, one row each"
        assert {n: (c.type, c.comment) for n, c in node.columns.items()} == {
            "id": ("int", "The customer id"), "dt": ("string", "Partition"), "name": ("string", None),
            "v": ("int", None), "op": ("string", None), "previous_v": ("int", None),
            "loaded_incrementally": ("boolean", None)}
        # catalog stats from the latest snapshot's metadata (issue 13): no data read
        table = FileStoreTable.open(path)
        snapshot = table.latest_snapshot()
        stats = {k: s.value for k, s in node.stats.items() if k != "has_stats"}
        assert stats == {"rows": snapshot.total_record_count, "snapshot": snapshot.id,
                         "files": sum(len(s.files) for s in table.plan().splits),
                         "bytes": sum(f.file_size for s in table.plan().splits for f in s.files)}
        assert stats["files"] >= 1 and stats["bytes"] > 0

        # --full-refresh rebuilds the table from scratch: a new table whose first snapshot has batch 3
        rebuilt = self._run(project, 3, "--full-refresh")
        assert rebuilt["message"] == "replaced the table: UPSERT 3: 2 inserted, 0 updated, 1 skipped"
        assert rebuilt["adapter_response"]["snapshot_id"] == 1
        assert [r[:2] for r in _rows(project, "customers")] == [(1, "a"), (5, "a")]
        # nothing of the refresh is left beside the table but the new table's key index, which
        # followed it and needs no catch-up (dbt_paimon/key_index/)
        assert [n for n in os.listdir(os.path.dirname(path)) if n.startswith(".customers")] == [
            ".customers.dbt-key-index"]
        table = FileStoreTable.open(path)
        state = KeyIndex(table.io, table.path, table.schema).refresh(table.plan())
        assert state.stats == {"built": False, "buckets_read_again": 0, "buckets_added_to": 0, "buckets_dropped": 0}
        assert sorted(KeyIndex(table.io, table.path, table.schema).lookup(
            state, pa.table({"id": pa.array([1, 2, 5], pa.int32())})).column("id").to_pylist()) == [1, 5]

    def test_unsupported_configs_warn(self, project):
        _, log = run_dbt_and_capture(["run", "--select", "unsupported"])
        assert "config file_format='delta' is ignored" in log
        assert "config tblproperties={'k': 'v'} is ignored" in log


KEYED_SQL = """
{{ config(materialized='paimon_upsert', unique_key=var('key', 'id'), partition_by=var('part', 'dt'),
          options=var('options', {}), execution=var('execution', 'auto'), key_index=var('key_index', none)) }}
{% set rows = {
    'good': "(1, 'a', 'x'), (2, 'b', 'y')",
    'update': "(1, 'b', 'z'), (3, 'a', 'w')",
    'duplicate': "(1, 'a', 'x'), (1, 'b', 'y')",
    'null_key': "(cast(null as int), 'a', 'x')",
} %}
select * from values {{ rows[var('rows', 'good')] }} as t(id, dt, name)
"""


def _files(path):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs)


class TestPaimonUpsertRefusals:
    """Runs that cannot be applied fail with a clear message and write nothing."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"keyed.sql": KEYED_SQL}

    @pytest.mark.parametrize("variables,message", [
        ("{key: [id, name]}", "unique_key ['id', 'name'] but the table's primary key is ['id']"),
        ("{part: name}", "partition_by ['name'] but the table is partitioned by ['dt']"),
        ("{rows: duplicate}", "duplicate row(s) for key(s)"),
        ("{rows: null_key}", "is null"),
        ("{options: {bucket-count: 3}}", "unknown table option 'bucket-count'"),
        ("{options: {merge-engine: first-row}}",
         "option 'merge-engine' is not set (Paimon's default) on the existing table"),
        ("{key: nope}", "unique_key column 'nope' is not a column"),
        ("{rows: duplicate, execution: distributed}", "duplicate row(s) for key(s)"),
        ("{execution: fast}", "execution must be one of auto, local, distributed, got 'fast'"),
        ("{key_index: sometimes}", "key_index must be true or false, got 'sometimes'"),
        ("{rows: duplicate, key_index: false}", "duplicate row(s) for key(s)"),
    ], ids=["key", "partition", "duplicate", "null-key", "unknown-option", "changed-option", "not-a-column",
            "duplicate-on-spark", "unknown-execution", "bad-key-index", "duplicate-without-index"])
    def test_refused_and_nothing_written(self, project, variables, message):
        relation = project.adapter.Relation.create(schema=project.test_schema, identifier="keyed")
        path = project.adapter.paimon_table_path(relation)
        if not FileStoreTable.exists(path):
            run_dbt(["run", "--select", "keyed"])
            run_dbt(["run", "--select", "keyed", "--vars", "{rows: update}"])
        before, snapshot = _files(path), FileStoreTable.open(path).latest_snapshot().id
        result = run_dbt(["run", "--select", "keyed", "--vars", variables], expect_pass=False).results[0]
        assert message in result.message, result.message
        assert _files(path) == before
        assert FileStoreTable.open(path).latest_snapshot().id == snapshot
        assert sorted(_rows(project, "keyed")) == [(1, "b", "z"), (2, "b", "y"), (3, "a", "w")]


NESTED_SQL = """
{{ config(materialized='paimon_upsert', unique_key='id', partition_by='dt') }}
{% if var('run', 1) == 1 %}
select 1 as id, 'a' as dt, array('x', 'y') as tags, map('k', 1) as attrs,
       named_struct('city', 'c1', 'zip', 10) as addr
union all select 2, 'a', array(), cast(null as map<string, int>), named_struct('city', cast(null as string), 'zip', 20)
{% else %}
select 2 as id, 'b' as dt, array('z', null) as tags, map('k', 2, 'j', null) as attrs,
       cast(null as struct<city: string, zip: int>) as addr
union all select 3, 'b', cast(null as array<string>), map(), named_struct('city', 'c3', 'zip', 30)
{% endif %}
"""
TAGS_SQL = "select id, tag from {{ ref('nested') }} lateral view explode(tags) t as tag"


class TestNestedColumns:
    """A model's array, map and struct columns: upserted (key 2 moves partition with new values), read
    by Spark SQL through the catalog entry (a downstream view explodes the array) and by pypaimon."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"nested.sql": NESTED_SQL, "tags.sql": TAGS_SQL}

    def test_nested_columns_round_trip(self, project):
        run_dbt(["run", "--select", "nested"])
        results = run_dbt(["run", "--vars", "{run: 2}"]).results
        assert {r.node.name: r.status for r in results} == {"nested": "success", "tags": "success"}
        got = project.run_sql(f"select id, dt, tags, attrs, addr.city, addr.zip from {project.test_schema}.nested "
                              "order by id", fetch="all")
        assert [tuple(r) for r in got] == [
            (1, "a", ["x", "y"], {"k": 1}, "c1", 10),
            (2, "b", ["z", None], {"k": 2, "j": None}, None, None),
            (3, "b", None, {}, "c3", 30)]
        tags = project.run_sql(f"select id, tag from {project.test_schema}.tags order by id, tag", fetch="all")
        assert [tuple(r) for r in tags] == [(1, "x"), (1, "y"), (2, None), (2, "z")]
        relation = project.adapter.Relation.create(schema=project.test_schema, identifier="nested")
        stored = rows(pypaimon_read(project.adapter.paimon_table_path(relation)), "id")
        assert [(r["id"], r["tags"], r["attrs"], r["addr"]) for r in stored] == [
            (1, ["x", "y"], [("k", 1)], {"city": "c1", "zip": 10}),
            (2, ["z", None], [("k", 2), ("j", None)], None),
            (3, None, [], {"city": "c3", "zip": 30})]
