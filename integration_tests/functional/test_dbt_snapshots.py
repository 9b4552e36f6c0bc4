"""`dbt snapshot` into Paimon tables (macros/materializations/snapshot.sql, adapter/snapshots.py), end
to end: real dbt commands, one SparkSession, real files, every table read back with pypaimon.

Our own walk-throughs: each strategy (timestamp, check) under each hard_deletes mode and
dbt_valid_to_current, with keys that move partitions; a run that changes nothing commits nothing,
one that closes and opens versions commits exactly one Paimon snapshot; every refusal leaves the
table's files byte-identical. The expected rows are dbt-core's semantics, worked out by hand in each
test. dbt-tests-adapter's own snapshot classes are in test_dbt_snapshots_upstream.py.
"""

import datetime
import json
import os

import pytest
from dbt.tests.util import relation_from_name, run_dbt

from dbt_paimon.store import FileStoreTable
from tests.files import fingerprint
from tests.oracle import pypaimon_read

UTC = datetime.timezone.utc
T1 = datetime.datetime(2024, 1, 1, tzinfo=UTC)
T2 = datetime.datetime(2024, 2, 1, tzinfo=UTC)
T3 = datetime.datetime(2024, 3, 1, tzinfo=UTC)
FOREVER = datetime.datetime(9999, 12, 31, tzinfo=UTC)
LABELS = {T1: "t1", T2: "t2", T3: "t3", FOREVER: "forever"}


def _path(project, name):
    return project.adapter.paimon_table_path(project.adapter.Relation.create(schema=project.test_schema,
                                                                             identifier=name))


def _results(project):
    with open(os.path.join(project.project_root, "target", "run_results.json")) as f:
        return {r["unique_id"].split(".")[-1]: r for r in json.load(f)["results"]}


class Runs:
    """`dbt snapshot` runs, and the wall-clock span of each: a timestamp dbt took from the run
    (snapshot_get_time) is named after its run, so expected rows can be written down."""

    def __init__(self):
        self.spans = {}

    def snapshot(self, project, batch, *args, expect_pass=True):
        start = datetime.datetime.now(UTC)
        results = run_dbt(["snapshot", "--vars", f"batch: {batch}", *args], expect_pass=expect_pass)
        self.spans[f"run{batch}"] = (start, datetime.datetime.now(UTC))
        return results

    def label(self, value):
        if value is None or value in LABELS:
            return LABELS.get(value)
        for name, (start, end) in self.spans.items():
            if start <= value <= end:
                return name
        return value


def _versions(runs, path, *columns, valid_from="dbt_valid_from", valid_to="dbt_valid_to", extra=()):
    """pypaimon's rows as (columns..., valid_from, valid_to, extra...) with run times named, in
    order (a null after any value of its column)."""
    rows = [tuple(r[c] for c in columns) + (runs.label(r[valid_from]), runs.label(r[valid_to]))
            + tuple(r[c] for c in extra) for r in pypaimon_read(path).to_pylist()]
    return sorted(rows, key=lambda row: tuple((v is None, "" if v is None else v) for v in row))


def _appends(path):
    """The table's Paimon snapshots: (id, commit kind)."""
    t = FileStoreTable.open(path)
    return [(i, t.snapshots.snapshot(i).commit_kind) for i in t.snapshots.ids()]


def _partition_placement(path, column):
    """Every live row, read partition by partition, must carry its partition's value: the row was
    written to (or moved to) the partition its column names."""
    table = FileStoreTable.open(path)
    index = table.schema.partition_keys.index(column)
    placed = {}
    for values in {s.partition_values for s in table.plan().splits}:
        rows = table.to_arrow(partition_filter=lambda p, v=values: tuple(p.values()) == v).to_pylist()
        placed[values[index]] = rows
    return placed


# ---- the source of the walk-throughs: rows by batch, a key moving partitions in batches 2 and 4 ----

SOURCE_MACRO = """
{% macro people() %}
{% set batches = {
    1: [(1, 'eu', 'ann', '2024-01-01'), (2, 'eu', 'bob', '2024-01-01'), (3, 'us', 'cid', '2024-01-01')],
    2: [(1, 'us', 'ann', '2024-02-01'), (2, 'eu', 'bob', '2024-01-01'), (4, 'eu', 'dee', '2024-02-01')],
    3: [(1, 'us', 'ann', '2024-02-01'), (2, 'eu', 'bob', '2024-01-01'), (4, 'eu', 'dee', '2024-02-01')],
    4: [(1, 'us', 'ann', '2024-02-01'), (3, 'eu', 'cid', '2024-03-01'), (4, 'us', 'dee', '2024-03-01')],
} %}
select * from values
{%- for id, region, name, at in batches[var('batch')] %}
  ({{ id }}, '{{ region }}', '{{ name }}', timestamp'{{ at }} 00:00:00'){{ ',' if not loop.last }}
{%- endfor %}
as t(id, region, name, updated_at)
{% endmacro %}
"""


def _timestamp_snapshot(name, hard_deletes):
    return f"""
{{% snapshot {name} %}}
{{{{ config(strategy='timestamp', unique_key='id', updated_at='updated_at', partition_by='region',
          hard_deletes='{hard_deletes}') }}}}
{{{{ people() }}}}
{{% endsnapshot %}}
"""


class TestTimestampStrategy:
    """strategy='timestamp' under hard_deletes ignore, invalidate and new_record (three snapshots of
    one source), partitioned by region. Batch 2 moves key 1 from eu to us, deletes key 3 and adds
    key 4; batch 3 repeats batch 2; batch 4 deletes key 2, brings key 3 back in eu and moves key 4
    to us. A moving key's old version is closed in its old partition and the new one opened in the
    new partition, in one Paimon snapshot."""

    @pytest.fixture(scope="class")
    def macros(self):
        return {"people.sql": SOURCE_MACRO}

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {f"ts_{mode}.sql": _timestamp_snapshot(f"ts_{mode}", mode) for mode in
                ("ignore", "invalidate", "new_record")}

    def test_three_hard_deletes_modes(self, project):
        runs = Runs()
        paths = {mode: _path(project, f"ts_{mode}") for mode in ("ignore", "invalidate", "new_record")}
        first = [(1, "eu", "ann", "t1", None), (2, "eu", "bob", "t1", None), (3, "us", "cid", "t1", None)]

        def versions(mode):
            extra = ("dbt_is_deleted",) if mode == "new_record" else ()
            return _versions(runs, paths[mode], "id", "region", "name", extra=extra)

        runs.snapshot(project, 1)
        assert versions("ignore") == versions("invalidate") == first
        assert versions("new_record") == [r + ("False",) for r in first]
        assert {m: _appends(p) for m, p in paths.items()} == {m: [(1, "APPEND")] for m in paths}

        runs.snapshot(project, 2)
        messages = {k: r["message"] for k, r in _results(project).items()}
        assert messages == {"ts_ignore": "SNAPSHOT 3: 2 opened, 1 closed",
                            "ts_invalidate": "SNAPSHOT 4: 2 opened, 2 closed",
                            "ts_new_record": "SNAPSHOT 5: 3 opened, 2 closed"}
        moved = [(1, "eu", "ann", "t1", "t2"), (1, "us", "ann", "t2", None)]
        assert versions("ignore") == moved + [(2, "eu", "bob", "t1", None), (3, "us", "cid", "t1", None),
                                              (4, "eu", "dee", "t2", None)]
        assert versions("invalidate") == moved + [(2, "eu", "bob", "t1", None), (3, "us", "cid", "t1", "run2"),
                                                  (4, "eu", "dee", "t2", None)]
        # new_record: the deleted key's version is closed and a deletion record opened, carrying the
        # columns of the version it follows
        assert versions("new_record") == [r + ("False",) for r in moved] + [
            (2, "eu", "bob", "t1", None, "False"), (3, "us", "cid", "run2", None, "True"),
            (3, "us", "cid", "t1", "run2", "False"), (4, "eu", "dee", "t2", None, "False")]
        # closing and opening: one APPEND snapshot per table
        assert {m: _appends(p) for m, p in paths.items()} == {m: [(1, "APPEND"), (2, "APPEND")] for m in paths}

        # the same source again: no version changes, no Paimon snapshot, no file
        files = {m: fingerprint(p) for m, p in paths.items()}
        runs.snapshot(project, 3)
        assert {k: r["message"] for k, r in _results(project).items()} == {
            k: "SNAPSHOT 0: no changes" for k in messages}
        assert {m: fingerprint(p) for m, p in paths.items()} == files

        runs.snapshot(project, 4)
        assert {k: r["message"] for k, r in _results(project).items()} == {
            "ts_ignore": "SNAPSHOT 4: 2 opened, 2 closed",
            "ts_invalidate": "SNAPSHOT 4: 2 opened, 2 closed",
            "ts_new_record": "SNAPSHOT 6: 3 opened, 3 closed"}
        assert versions("ignore") == moved + [
            (2, "eu", "bob", "t1", None), (3, "eu", "cid", "t3", None), (3, "us", "cid", "t1", "t3"),
            (4, "eu", "dee", "t2", "t3"), (4, "us", "dee", "t3", None)]
        # invalidate: a key that comes back gets a new version; its closed one stays closed
        assert versions("invalidate") == moved + [
            (2, "eu", "bob", "t1", "run4"), (3, "eu", "cid", "t3", None), (3, "us", "cid", "t1", "run2"),
            (4, "eu", "dee", "t2", "t3"), (4, "us", "dee", "t3", None)]
        # new_record: the deletion record of key 3 is closed by the version that brings it back (at
        # the source's updated_at, as dbt-core does)
        assert versions("new_record") == [r + ("False",) for r in moved] + [
            (2, "eu", "bob", "run4", None, "True"), (2, "eu", "bob", "t1", "run4", "False"),
            (3, "eu", "cid", "t3", None, "False"), (3, "us", "cid", "run2", "t3", "True"),
            (3, "us", "cid", "t1", "run2", "False"), (4, "eu", "dee", "t2", "t3", "False"),
            (4, "us", "dee", "t3", None, "False")]
        assert {m: _appends(p) for m, p in paths.items()} == {
            m: [(1, "APPEND"), (2, "APPEND"), (3, "APPEND")] for m in paths}

        for mode, path in paths.items():
            # each version lives in its region's partition; Spark SQL sees the current ones pypaimon sees
            for region, rows in _partition_placement(path, "region").items():
                assert {r["region"] for r in rows} == {region}
            table = relation_from_name(project.adapter, f"ts_{mode}")
            count = project.run_sql(f"select count(*) from {table} where dbt_valid_to is null", fetch="one")[0]
            assert count == sum(r[4] is None for r in versions(mode))
            # the key is dbt_scd_id alone, unique
            assert list(FileStoreTable.open(path).schema.primary_keys) == ["dbt_scd_id"]


CHECK_COLS_SNAPSHOT = """
{% snapshot chk_cols %}
{{ config(strategy='check', check_cols=['name', 'region'], unique_key=['id', 'kind'], partition_by='region',
          hard_deletes='invalidate', dbt_valid_to_current="to_timestamp('9999-12-31 00:00:00')",
          snapshot_meta_column_names={'dbt_scd_id': 'version_id', 'dbt_valid_from': 'valid_from',
                                      'dbt_valid_to': 'valid_until', 'dbt_updated_at': 'version_updated_at'}) }}
{{ scored() }}
{% endsnapshot %}
"""

CHECK_ALL_SNAPSHOT = """
{% snapshot chk_all %}
{{ config(strategy='check', check_cols='all', unique_key='id', partition_by='dbt_valid_to',
          hard_deletes='new_record', dbt_valid_to_current="to_timestamp('9999-12-31 00:00:00')") }}
{{ scored() }}
{% endsnapshot %}
"""

SCORED_MACRO = """
{% macro scored() %}
{% set batches = {
    1: "(1, 'a', 'eu', 'ann', 10), (2, 'a', 'eu', 'bob', 20), (3, 'b', 'us', 'cid', 30)",
    2: "(1, 'a', 'us', 'ann', 10), (2, 'a', 'eu', 'bob', 21), (4, 'a', 'eu', 'dee', 40)",
    3: "(1, 'a', 'us', 'ann', 10), (2, 'a', 'eu', 'bob', 21), (4, 'a', 'eu', 'dee', 40)",
} %}
select *{% if var('batch') == 4 %}, 'gold' as tier{% endif %}
from values {{ batches[[var('batch'), 3] | min] }} as t(id, kind, region, name, score)
{% endmacro %}
"""


class TestCheckStrategy:
    """strategy='check' with dbt_valid_to_current:

    chk_cols: check_cols [name, region], a two-column unique_key, hard_deletes='invalidate',
    renamed meta columns (the Paimon key is then `version_id`), partitioned by region: key 1 moves
    to us (a new version there), key 2 changes only `score`, which is not checked.

    chk_all: check_cols='all', hard_deletes='new_record', partitioned by dbt_valid_to: current
    versions live in the 9999-12-31 partition, and closing a version moves its Paimon row to the
    partition of its end time (the engine's cross-partition move).

    Batch 4 adds a column: it is added to both Paimon schemas; check_cols='all' then versions every
    current row anew (dbt-core's rule for a new column), chk_cols changes nothing."""

    @pytest.fixture(scope="class")
    def macros(self):
        return {"scored.sql": SCORED_MACRO}

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"chk_cols.sql": CHECK_COLS_SNAPSHOT, "chk_all.sql": CHECK_ALL_SNAPSHOT}

    def test_check_cols_and_all(self, project):
        runs = Runs()
        cols, every = _path(project, "chk_cols"), _path(project, "chk_all")

        def cols_versions():
            return _versions(runs, cols, "id", "kind", "region", "name", "score", valid_from="valid_from",
                             valid_to="valid_until")

        def all_versions(*extra):
            return _versions(runs, every, "id", "region", "name", "score", extra=("dbt_is_deleted", *extra))

        runs.snapshot(project, 1)
        assert cols_versions() == [(1, "a", "eu", "ann", 10, "run1", "forever"),
                                   (2, "a", "eu", "bob", 20, "run1", "forever"),
                                   (3, "b", "us", "cid", 30, "run1", "forever")]
        schema = FileStoreTable.open(cols).schema
        assert list(schema.primary_keys) == ["version_id"] and list(schema.partition_keys) == ["region"]
        assert {"valid_from", "valid_until", "version_updated_at"} <= set(schema.field_names)

        runs.snapshot(project, 2)
        assert {k: r["message"] for k, r in _results(project).items()} == {
            "chk_cols": "SNAPSHOT 4: 2 opened, 2 closed", "chk_all": "SNAPSHOT 7: 4 opened, 3 closed"}
        assert cols_versions() == [
            (1, "a", "eu", "ann", 10, "run1", "run2"), (1, "a", "us", "ann", 10, "run2", "forever"),
            (2, "a", "eu", "bob", 20, "run1", "forever"),   # score is not checked: no new version
            (3, "b", "us", "cid", 30, "run1", "run2"),      # invalidated: closed at the run's time
            (4, "a", "eu", "dee", 40, "run2", "forever")]
        assert all_versions() == [
            (1, "eu", "ann", 10, "run1", "run2", "False"), (1, "us", "ann", 10, "run2", "forever", "False"),
            (2, "eu", "bob", 20, "run1", "run2", "False"), (2, "eu", "bob", 21, "run2", "forever", "False"),
            (3, "us", "cid", 30, "run1", "run2", "False"), (3, "us", "cid", 30, "run2", "forever", "True"),
            (4, "eu", "dee", 40, "run2", "forever", "False")]
        # a closed version ends exactly where the next one starts (the run's one current_timestamp)
        rows = pypaimon_read(cols).to_pylist()
        assert {r["valid_until"] for r in rows if r["id"] == 1 and r["region"] == "eu"} == \
               {r["valid_from"] for r in rows if r["id"] == 1 and r["region"] == "us"}
        # chk_all: each row is in the partition of its dbt_valid_to: the closed ones were moved
        placed = _partition_placement(every, "dbt_valid_to")
        for value, rows in placed.items():
            assert {r["dbt_valid_to"] for r in rows} == {value}
        assert {runs.label(value): len(rows) for value, rows in placed.items()} == {"forever": 4, "run2": 3}
        assert [_appends(p) for p in (cols, every)] == [[(1, "APPEND"), (2, "APPEND")]] * 2

        files = [fingerprint(p) for p in (cols, every)]
        runs.snapshot(project, 3)
        assert [fingerprint(p) for p in (cols, every)] == files

        # a new column: both schemas gain it; only check_cols='all' versions the rows anew
        runs.snapshot(project, 4)
        results = _results(project)
        assert results["chk_cols"]["message"] == "SNAPSHOT 0: no changes, added column(s) tier"
        assert results["chk_all"]["message"] == "SNAPSHOT 6: 3 opened, 3 closed"
        assert results["chk_all"]["adapter_response"]["added_columns"] == ["tier"]
        assert [_appends(p) for p in (cols, every)] == [[(1, "APPEND"), (2, "APPEND")],
                                                        [(1, "APPEND"), (2, "APPEND"), (3, "APPEND")]]
        assert "tier" in FileStoreTable.open(cols).schema.field_names
        assert [r[-1] for r in _versions(runs, cols, "id", valid_from="valid_from", valid_to="valid_until",
                                         extra=("tier",))] == [None] * 5
        assert all_versions("tier") == [
            (1, "eu", "ann", 10, "run1", "run2", "False", None), (1, "us", "ann", 10, "run2", "run4", "False", None),
            (1, "us", "ann", 10, "run4", "forever", "False", "gold"),
            (2, "eu", "bob", 20, "run1", "run2", "False", None), (2, "eu", "bob", 21, "run2", "run4", "False", None),
            (2, "eu", "bob", 21, "run4", "forever", "False", "gold"),
            (3, "us", "cid", 30, "run1", "run2", "False", None), (3, "us", "cid", 30, "run2", "forever", "True", None),
            (4, "eu", "dee", 40, "run2", "run4", "False", None),
            (4, "eu", "dee", 40, "run4", "forever", "False", "gold")]


# ---- refusals: nothing is written, the table's files stay byte-identical -----------------------------

GUARDED_SNAPSHOT = """
{% snapshot guarded %}
{{ config(strategy=var('strategy', 'check'), unique_key='id', check_cols=var('check_cols', ['name']),
          updated_at=var('updated_at', none), hard_deletes=var('hard_deletes', 'invalidate'),
          partition_by=var('partition_by', 'region'), file_format=var('file_format', none),
          options=var('options', {}), execution=var('execution', 'auto')) }}
{% set rows = {
    'first': "(1, 'eu', 'ann', timestamp'2024-01-01 00:00:00'), (2, 'us', 'bob', timestamp'2024-01-01 00:00:00')",
    'second': "(1, 'us', 'ann2', timestamp'2024-02-01 00:00:00'), (2, 'us', 'bo', timestamp'2024-02-01 00:00:00')",
    'duplicate': "(1, 'eu', 'x', timestamp'2024-03-01 00:00:00'), (1, 'us', 'y', timestamp'2024-03-01 00:00:00')",
} %}
{% if var('rows', 'second') == 'retyped' %}
select 1 as id, 'eu' as region, 7 as name, timestamp'2024-03-01 00:00:00' as updated_at
{% elif var('rows', 'second') == 'clash' %}
select *, timestamp'2024-03-01 00:00:00' as dbt_valid_from
from values {{ rows['second'] }} as t(id, region, name, updated_at)
{% else %}
select * from values {{ rows[var('rows', 'second')] }} as t(id, region, name, updated_at)
{% endif %}
{% endsnapshot %}
"""

FRESH_SNAPSHOT = """
{% snapshot fresh %}
{{ config(strategy='check', unique_key='id', check_cols=var('fresh_cols', ['name'])) }}
select 1 as id, 'ann' as name
{% endsnapshot %}
"""


class TestRefusals:
    """A snapshot this adapter cannot apply fails with a clear message before anything is written:
    the table's files stay byte-identical and no Paimon snapshot is added."""

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"guarded.sql": GUARDED_SNAPSHOT, "fresh.sql": FRESH_SNAPSHOT}

    @pytest.mark.parametrize("variables,message", [
        ("{check_cols: [nope]}", "check_cols ['nope'] is not a column of the snapshot's query"),
        ("{hard_deletes: sometimes}", "hard_deletes must be one of ignore, invalidate, new_record, got 'sometimes'"),
        ("{file_format: delta}", "file_format='delta' is not available: on dbt-paimon a snapshot is always a Paimon"),
        ("{partition_by: name}", "partition_by ['name'] but the table is partitioned by ['region']"),
        ("{options: {merge-engine: first-row}}", "table option merge-engine='first-row' is not available"),
        ("{options: {bucket: 2}}", "option bucket='2' but the table has None"),
        ("{strategy: timestamp, check_cols: null, updated_at: changed_at}",
         "updated_at column 'changed_at' is not a column of the snapshot's query"),
        ("{rows: duplicate}", "share a dbt_scd_id (is unique_key unique in the snapshot's query?)"),
        ("{rows: clash}", "already returns column(s) ['dbt_valid_from']"),
        ("{rows: retyped}", "column 'name' is STRING in the snapshot table but int in the snapshot's query"),
        ("{execution: fast}", "execution must be one of auto, local, distributed, got 'fast'"),
    ], ids=["check-cols", "hard-deletes", "file-format", "partition-by", "merge-engine", "changed-option",
            "updated-at", "duplicate-key", "meta-column-clash", "retyped-column", "execution"])
    def test_refused_and_nothing_written(self, project, variables, message):
        path = _path(project, "guarded")
        if not FileStoreTable.exists(path):
            run_dbt(["snapshot", "--select", "guarded", "--vars", "{rows: first}"])
            run_dbt(["snapshot", "--select", "guarded"])
        before, snapshots = fingerprint(path), _appends(path)
        assert snapshots == [(1, "APPEND"), (2, "APPEND")]
        result = run_dbt(["snapshot", "--select", "guarded", "--vars", variables], expect_pass=False).results[0]
        assert message in result.message, result.message
        assert fingerprint(path) == before
        current = sorted((r["id"], r["region"], r["name"]) for r in pypaimon_read(path).to_pylist()
                         if r["dbt_valid_to"] is None)
        assert current == [(1, "us", "ann2"), (2, "us", "bo")]

    def test_a_refused_first_run_creates_nothing(self, project):
        path = _path(project, "fresh")
        result = run_dbt(["snapshot", "--select", "fresh", "--vars", "{fresh_cols: [nope]}"],
                         expect_pass=False).results[0]
        assert "check_cols ['nope'] is not a column of the snapshot's query (columns: id, name)" in result.message
        assert not os.path.exists(path)
        run_dbt(["snapshot", "--select", "fresh"])
        assert [r["name"] for r in pypaimon_read(path).to_pylist()] == ["ann"]

    def test_a_table_in_the_way_is_kept(self, project):
        """A non-Paimon table under the snapshot's name holds whatever it holds: refused, never dropped."""
        project.run_sql(f"create table {project.test_schema}.in_the_way (id int) using parquet")
        project.run_sql(f"insert into {project.test_schema}.in_the_way values (1)")
        snapshot = FRESH_SNAPSHOT.replace("snapshot fresh", "snapshot in_the_way")
        with open(os.path.join(project.project_root, "snapshots", "in_the_way.sql"), "w") as f:
            f.write(snapshot)
        result = run_dbt(["snapshot", "--select", "in_the_way"], expect_pass=False).results[0]
        assert "a table that is not a Paimon table exists under the snapshot's name" in result.message
        assert project.run_sql(f"select id from {project.test_schema}.in_the_way", fetch="all") == [(1,)]
