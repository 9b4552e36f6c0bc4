"""`dbt snapshot` into Paimon tables (macros/materializations/snapshot.sql, adapter/snapshots.py), end
to end: real dbt commands, one SparkSession, real files, every table read back with pypaimon.

Our own walk-throughs first: each strategy (timestamp, check) under each hard_deletes mode and
dbt_valid_to_current, with keys that move partitions; a run that changes nothing commits nothing,
one that closes and opens versions commits exactly one Paimon snapshot; every refusal leaves the
table's files byte-identical. The expected rows are dbt-core's semantics, worked out by hand in each
test. dbt-tests-adapter's own snapshot classes follow at the end, with the adaptations they need
on Spark without Delta explained there.
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


# ---- dbt-tests-adapter's snapshot classes ---------------------------------------------------------------
#
# Every test method and assertion below is upstream's; what changes is how the *source* tables
# change. Upstream runs UPDATE and DELETE on them, which Spark runs only on Delta tables (dbt-spark
# runs these classes on Databricks and skips them on its session profile), and a Spark table cannot
# be overwritten from itself. So each source table (and each expected table a test compares with) is
# an append-only log, `<t>__log` (parquet), behind a view `<t>` showing each key's latest entry
# unless that entry is a deletion: an UPDATE appends the changed rows, a DELETE appends deletion
# entries, an INSERT appends rows. Each is still one statement, as the fixtures require. The
# snapshots themselves are Paimon tables, written only by `dbt snapshot`; upstream's `delete from
# snapshot` between tests is a Paimon delete through the adapter (paimon_delete). Postgres syntax
# becomes Spark's (`TIMESTAMP '...'`, `cast(... as string)`, `interval 1 hour`), as in dbt-spark's
# own adaptation of these fixtures.
#
# Not used: basic/test_snapshot_{timestamp,check_cols}.py (their update_rows helper issues UPDATE
# from inside the test method, which no fixture replaces; simple_snapshot's classes check the same
# semantics), and test_various_configs.py (multi-statement Postgres SQL inside the test methods):
# what it checks, snapshot_meta_column_names, dbt_valid_to_current and a list unique_key, is
# checked by TestCheckStrategy above.

from dbt.tests.adapter.simple_snapshot.new_record_check_mode import BaseSnapshotNewRecordCheckMode  # noqa: E402
from dbt.tests.adapter.simple_snapshot.new_record_dbt_valid_to_current import (  # noqa: E402
                                                                               BaseSnapshotNewRecordDbtValidToCurrent)
from dbt.tests.adapter.simple_snapshot.new_record_timestamp_mode import (  # noqa: E402
                                                                         BaseSnapshotNewRecordTimestampMode)
from dbt.tests.adapter.simple_snapshot.test_snapshot import BaseSimpleSnapshot, BaseSnapshotCheck  # noqa: E402
from dbt.tests.util import get_connection  # noqa: E402


class LogTable:
    """A source table as an append-only log behind a view: SQL statements (with `{schema}`, which
    dbt's run_sql fills in) that change the view's rows as UPDATE, DELETE and INSERT would."""

    def __init__(self, name, columns, key="id"):
        self.name, self.columns, self.key = name, list(columns), key  # columns: [(name, type)]

    @property
    def names(self):
        return ", ".join(c for c, _ in self.columns)

    def _next(self):
        return f"(select coalesce(max(__seq), 0) + 1 from {{schema}}.{self.name}__log)"

    def create(self):
        ddl = ", ".join(f"{c} {t}" for c, t in self.columns)
        return [f"create table {{schema}}.{self.name}__log ({ddl}, __seq bigint, __deleted boolean) using parquet",
                self.view()]

    def view(self):
        return (f"create or replace view {{schema}}.{self.name} as select {self.names} from ("
                f"select *, row_number() over (partition by {self.key} order by __seq desc) as __n "
                f"from {{schema}}.{self.name}__log) where __n = 1 and not __deleted")

    def insert(self, select):
        # by name: a column added later sits after __seq and __deleted in the log
        return (f"insert into {{schema}}.{self.name}__log ({self.names}, __seq, __deleted) "
                f"select q.*, {self._next()}, false from ({select}) q")

    def update(self, updates, where):
        values = ", ".join(f"{updates[c]} as {c}" if c in updates else c for c, _ in self.columns)
        return self.insert(f"select {values} from {{schema}}.{self.name} where {where or 'true'}")

    def delete(self, where):
        return (f"insert into {{schema}}.{self.name}__log ({self.names}, __seq, __deleted) "
                f"select {self.names}, {self._next()}, true from {{schema}}.{self.name} where {where or 'true'}")


_PEOPLE = [("id", "int"), ("first_name", "string"), ("last_name", "string"), ("email", "string"),
           ("gender", "string"), ("ip_address", "string"), ("updated_at", "timestamp")]


class _LoggedFact:
    """BaseSimpleSnapshotBase's data helpers with `fact` a LogTable; the snapshot is Paimon."""

    def create_fact_from_seed(self, where=None):
        # upstream: create table fact as select * from seed where ...; the log takes the seed's types
        self.fact_log = LogTable("fact", _PEOPLE)
        self.project.run_sql("drop view if exists {schema}.fact")
        self.project.run_sql("drop table if exists {schema}.fact__log")
        self.project.run_sql("create table {schema}.fact__log using parquet as select *, cast(1 as bigint) as __seq, "
                             f"false as __deleted from {{schema}}.seed where {where or 'true'}")
        self.project.run_sql(self.fact_log.view())

    def insert_fact_records(self, where=None):
        self.project.run_sql(self.fact_log.insert(
            f"select {self.fact_log.names} from {{schema}}.seed where {where or 'true'}"))

    def update_fact_records(self, updates, where=None):
        self.project.run_sql(self.fact_log.update(updates, where))

    def delete_fact_records(self, where=None):
        self.project.run_sql(self.fact_log.delete(where))

    def add_fact_column(self, column=None, definition=None):
        # upstream: `varchar(200) default null`: a new column, null in every row so far
        self.project.run_sql(f"alter table {{schema}}.fact__log add columns ({column} string)")
        self.fact_log.columns.append((column, "string"))
        self.project.run_sql(self.fact_log.view())

    def delete_snapshot_records(self):
        with get_connection(self.project.adapter):
            self.project.adapter.paimon_delete(relation_from_name(self.project.adapter, "snapshot"), "true")

    def _assert_results(self, ids_with_current_snapshot_records, ids_with_closed_out_snapshot_records):
        super()._assert_results(ids_with_current_snapshot_records, ids_with_closed_out_snapshot_records)
        # upstream checks that every row is expected, which an empty snapshot passes too: every id
        # it names must also be in the snapshot
        ids = {r[0] for r in self.get_snapshot_records("id")}
        assert ids == set(ids_with_current_snapshot_records) | set(ids_with_closed_out_snapshot_records)


class TestSimpleSnapshotPaimon(_LoggedFact, BaseSimpleSnapshot):
    pass


class TestSnapshotCheckPaimon(_LoggedFact, BaseSnapshotCheck):
    pass


_SEED = LogTable("seed", [(c, t) for c, t in _PEOPLE])
_EXPECTED = LogTable("snapshot_expected", _PEOPLE + [("dbt_valid_from", "timestamp"), ("dbt_valid_to", "timestamp"),
                                                     ("dbt_scd_id", "string"), ("dbt_updated_at", "timestamp"),
                                                     ("dbt_is_deleted", "string")], key="dbt_scd_id")
_SEED_ROWS = """
(1, 'Judith', 'Kennedy', '(not provided)', 'Female', '54.60.24.128', TIMESTAMP '2015-12-24 12:19:28'),
(2, 'Arthur', 'Kelly', '(not provided)', 'Male', '62.56.24.215', TIMESTAMP '2015-10-28 16:22:15'),
(3, 'Rachel', 'Moreno', 'rmoreno2@msu.edu', 'Female', '31.222.249.23', TIMESTAMP '2016-04-05 02:05:30'),
(4, 'Ralph', 'Turner', 'rturner3@hp.com', 'Male', '157.83.76.114', TIMESTAMP '2016-08-08 00:06:51'),
(5, 'Laura', 'Gonzales', 'lgonzales4@howstuffworks.com', 'Female', '30.54.105.168', TIMESTAMP '2016-09-01 08:25:38'),
(6, 'Katherine', 'Lopez', 'klopez5@yahoo.co.jp', 'Female', '169.138.46.89', TIMESTAMP '2016-08-30 18:52:11'),
(7, 'Jeremy', 'Hamilton', 'jhamilton6@mozilla.org', 'Male', '231.189.13.133', TIMESTAMP '2016-07-17 02:09:46'),
(8, 'Heather', 'Rose', 'hrose7@goodreads.com', 'Female', '87.165.201.65', TIMESTAMP '2015-12-29 22:03:56'),
(9, 'Gregory', 'Kelly', 'gkelly8@trellian.com', 'Male', '154.209.99.7', TIMESTAMP '2016-03-24 21:18:16'),
(10, 'Rachel', 'Lopez', 'rlopez9@themeforest.net', 'Female', '237.165.82.71', TIMESTAMP '2016-08-20 15:44:49'),
(11, 'Donna', 'Welch', 'dwelcha@shutterfly.com', 'Female', '103.33.110.138', TIMESTAMP '2016-02-27 01:41:48'),
(12, 'Russell', 'Lawrence', 'rlawrenceb@qq.com', 'Male', '189.115.73.4', TIMESTAMP '2016-06-11 03:07:09'),
(13, 'Michelle', 'Montgomery', 'mmontgomeryc@scientificamerican.com', 'Female', '243.220.95.82', \
TIMESTAMP '2016-06-18 16:27:19'),
(14, 'Walter', 'Castillo', 'wcastillod@pagesperso-orange.fr', 'Male', '71.159.238.196', \
TIMESTAMP '2016-10-06 01:55:44'),
(15, 'Robin', 'Mills', 'rmillse@vkontakte.ru', 'Female', '172.190.5.50', TIMESTAMP '2016-10-31 11:41:21'),
(16, 'Raymond', 'Holmes', 'rholmesf@usgs.gov', 'Male', '148.153.166.95', TIMESTAMP '2016-10-03 08:16:38'),
(17, 'Gary', 'Bishop', 'gbishopg@plala.or.jp', 'Male', '161.108.182.13', TIMESTAMP '2016-08-29 19:35:20'),
(18, 'Anna', 'Riley', 'arileyh@nasa.gov', 'Female', '253.31.108.22', TIMESTAMP '2015-12-11 04:34:27'),
(19, 'Sarah', 'Knight', 'sknighti@foxnews.com', 'Female', '222.220.3.177', TIMESTAMP '2016-09-26 00:49:06'),
(20, 'Phyllis', 'Fox', null, 'Female', '163.191.232.95', TIMESTAMP '2016-08-21 10:35:19')
"""
# upstream's expected version of a seed row: dbt_scd_id is the md5 of the unique_key expression and updated_at
_EXPECTED_OF_SEED = f"""
select {_SEED.names}, updated_at as dbt_valid_from, cast(null as timestamp) as dbt_valid_to,
    md5(cast(id as string) || '-' || first_name || '|' || cast(updated_at as string)) as dbt_scd_id,
    updated_at as dbt_updated_at, 'False' as dbt_is_deleted
from {{schema}}.seed"""
_NEW_RECORD_STATEMENTS = [
    *_SEED.create(), *_EXPECTED.create(),
    _SEED.insert(f"select * from values {_SEED_ROWS} as v({_SEED.names})"),
    _EXPECTED.insert(_EXPECTED_OF_SEED),
]
_NEW_RECORD_INVALIDATE = [
    # update seed set updated_at = updated_at + 1 hour, email = ... where id between 10 and 20
    _SEED.update({"updated_at": "updated_at + interval 1 hour",
                  "email": "case when id = 20 then 'pfoxj@creativecommons.org' else concat('new_', email) end"},
                 "id >= 10 and id <= 20"),
    # update snapshot_expected set dbt_valid_to = updated_at + 1 hour where id between 10 and 20
    _EXPECTED.update({"dbt_valid_to": "updated_at + interval 1 hour"}, "id >= 10 and id <= 20"),
]
_NEW_RECORD_SNAPSHOT = """
{% snapshot snapshot_actual %}
    {{ config(unique_key='id || ' ~ "'-'" ~ ' || first_name') }}
    select * from {{ target.schema }}.seed
{% endsnapshot %}
"""


class _NewRecordFixtures:
    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"snapshot.sql": _NEW_RECORD_SNAPSHOT}

    @pytest.fixture(scope="class")
    def seed_new_record_mode_statements(self):
        return _NEW_RECORD_STATEMENTS

    @pytest.fixture(scope="class")
    def invalidate_sql_statements(self):
        return _NEW_RECORD_INVALIDATE

    @pytest.fixture(scope="class")
    def update_sql(self):  # insert v2 of records 10-20 into the expected table
        return _EXPECTED.insert(f"{_EXPECTED_OF_SEED} where id >= 10 and id <= 20")

    @pytest.fixture(scope="class")
    def delete_sql(self):
        return _SEED.delete("id = 1")

    @pytest.fixture(scope="class")
    def reinsert_sql(self):
        return _SEED.insert("select 1, 'Judith', 'Kennedy', '(not provided)', 'Female', '54.60.24.128', "
                            "TIMESTAMP '2200-01-01 12:00:00'")


class TestSnapshotNewRecordTimestampModePaimon(_NewRecordFixtures, BaseSnapshotNewRecordTimestampMode):
    pass


class TestSnapshotNewRecordCheckModePaimon(_NewRecordFixtures, BaseSnapshotNewRecordCheckMode):
    pass


_SMALL_SEED = LogTable("seed", [("id", "int"), ("first_name", "string")])


class TestSnapshotNewRecordDbtValidToCurrentPaimon(BaseSnapshotNewRecordDbtValidToCurrent):
    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"snapshot.sql": "{% snapshot snapshot_actual %}\n"
                                "select * from {{ target.schema }}.seed\n{% endsnapshot %}"}

    @pytest.fixture(scope="class")
    def seed_new_record_mode_statements(self):
        return [*_SMALL_SEED.create(), _SMALL_SEED.insert("select * from values (1, 'Judith'), (2, 'Arthur')")]

    @pytest.fixture(scope="class")
    def delete_sql(self):
        return _SMALL_SEED.delete("id = 1")
