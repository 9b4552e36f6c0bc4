"""Models without unique_key under file_format='paimon' are Paimon append tables: `table` rebuilds them,
`incremental` appends (the default strategy) or replaces the partitions a run holds (`insert_overwrite`),
each run one snapshot, read alike by Spark SQL and pypaimon. What cannot work is refused before anything
is written, in the words the model uses."""

import os

import pytest
from dbt.artifacts.schemas.results import RunStatus
from dbt.tests.util import run_dbt

from dbt_paimon.store import FileStoreTable
from tests.oracle import pypaimon_read, rows

# run 1: days 1-2; run 2: day 2 again (other values) and day 3
ROWS = """
{% if var('run', 1) == 1 %}
select 1 as id, 'd1' as dt, 10 as v union all select 2, 'd1', 20 union all select 3, 'd2', 30
{% else %}
select 4 as id, 'd2' as dt, 40 as v union all select 5, 'd3', 50
{% endif %}
"""
EVENTS = "{{ config(materialized='incremental', file_format='paimon', partition_by='dt') }}" + ROWS
DAILY = ("{{ config(materialized='incremental', file_format='paimon', partition_by='dt', "
         "incremental_strategy='insert_overwrite') }}" + ROWS)
WHOLE = ("{{ config(materialized='incremental', file_format='paimon', incremental_strategy='insert_overwrite') }}"
         + ROWS)
REBUILT = "{{ config(materialized='table', file_format='paimon') }}" + ROWS
KEYED_APPEND = ("{{ config(materialized='incremental', file_format='paimon', unique_key='id', "
                "incremental_strategy='append') }}" + ROWS)
MERGE_NO_KEY = ("{{ config(materialized='incremental', file_format='paimon', incremental_strategy='merge') }}"
                + ROWS)


def _table(project, name: str) -> FileStoreTable:
    warehouse = project.adapter.config.credentials.warehouse
    return FileStoreTable.open(os.path.join(warehouse, f"{project.test_schema}.db", name))


def _spark_rows(project, name: str) -> list[tuple]:
    return sorted(tuple(r) for r in project.run_sql(f"select id, dt, v from {project.test_schema}.{name}",
                                                      fetch="all"))


class TestAppendTables:
    @pytest.fixture(scope="class")
    def models(self):
        return {"events.sql": EVENTS, "daily.sql": DAILY, "whole.sql": WHOLE, "rebuilt.sql": REBUILT,
                "keyed_append.sql": KEYED_APPEND, "merge_no_key.sql": MERGE_NO_KEY}

    def test_append_overwrite_and_rebuild(self, project):
        ok = ["events", "daily", "whole", "rebuilt"]
        messages = [{r.node.name: r.message for r in run_dbt(["run", "--select", *ok, *more]).results}
                    for more in ([], ["--vars", "{run: 2}"])]
        # what each run did, in its own words: a `table` model builds the table whole each run
        assert [m["rebuilt"] for m in messages] == ["created the table: 3 rows", "replaced the table: 2 rows"]
        assert [m["events"] for m in messages] == ["appended 3 rows", "appended 2 rows"]
        first = [(1, "d1", 10), (2, "d1", 20), (3, "d2", 30)]
        second = [(4, "d2", 40), (5, "d3", 50)]
        expected = {
            "events": first + second,  # every row of both runs
            "daily": [(1, "d1", 10), (2, "d1", 20)] + second,  # d2 replaced, d1 kept, d3 added
            "whole": second,  # no partition_by: the whole table replaced
            "rebuilt": second,
        }
        for name, want in expected.items():
            table = _table(project, name)
            assert table.schema.is_append and not table.schema.primary_keys
            assert _spark_rows(project, name) == sorted(want), name
            assert sorted(tuple(r.values()) for r in rows(pypaimon_read(table.path), ["id"])) == sorted(want), name
        kinds = {name: _table(project, name).latest_snapshot().commit_kind for name in expected}
        assert kinds == {"events": "APPEND", "daily": "OVERWRITE", "whole": "OVERWRITE", "rebuilt": "APPEND"}
        assert _table(project, "events").latest_snapshot().id == 2  # one snapshot per run

    def test_what_cannot_work_is_refused_before_anything_is_written(self, project):
        results = run_dbt(["run", "--select", "keyed_append", "merge_no_key"], expect_pass=False).results
        messages = {r.node.name: r.message for r in results}
        assert all(r.status == RunStatus.Error for r in results)
        assert "incremental_strategy 'append' keeps every row" in messages["keyed_append"]
        assert "incremental_strategy 'merge' needs unique_key" in messages["merge_no_key"]
        warehouse = project.adapter.config.credentials.warehouse
        for name in messages:
            assert not FileStoreTable.exists(os.path.join(warehouse, f"{project.test_schema}.db", name))


PEOPLE = """id,name,born,score,active
1,Ann,2001-02-03,1.5,true
2,Bob,1999-12-31,,false
3,,2010-06-01,3.25,
"""


class TestPaimonSeeds:
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"people.csv": PEOPLE}

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"seeds": {"+file_format": "paimon", "+column_types": {"id": "int"}}}

    def test_a_seed_is_an_append_table_rebuilt_by_each_dbt_seed(self, project):
        import datetime as dt

        [result] = run_dbt(["seed"]).results
        table = _table(project, "people")
        assert table.schema.is_append and table.latest_snapshot().id == 1
        types = {f.name: f.type.sql() for f in table.schema.fields}
        assert types == {"id": "INT", "name": "STRING", "born": "DATE", "score": "DOUBLE", "active": "BOOLEAN"}
        want = [(1, "Ann", dt.date(2001, 2, 3), 1.5, True), (2, "Bob", dt.date(1999, 12, 31), None, False),
                (3, None, dt.date(2010, 6, 1), 3.25, None)]
        got = sorted(tuple(r) for r in project.run_sql(f"select * from {project.test_schema}.people", fetch="all"))
        assert got == want
        assert [tuple(r.values()) for r in rows(pypaimon_read(table.path), ["id"])] == want

        # the CSV changes: the next `dbt seed` builds the table anew (as a `table` model is), one snapshot
        with open(os.path.join(project.project_root, "seeds", "people.csv"), "w") as f:
            f.write("id,name,born,score,active\n7,Eve,2020-01-01,9.5,true\n")
        run_dbt(["seed"])
        table = _table(project, "people")
        assert table.latest_snapshot().id == 1 and table.latest_snapshot().total_record_count == 1
        got = [tuple(r) for r in project.run_sql(f"select * from {project.test_schema}.people", fetch="all")]
        assert got == [(7, "Eve", dt.date(2020, 1, 1), 9.5, True)]


EVENTS_SOURCE = """{{ config(materialized='table', event_time='ts') }}
select 1 as id, cast('2024-01-01 10:00:00' as timestamp) as ts, 'a' as v
union all select 2, cast('2024-01-02 10:00:00' as timestamp), 'b'
union all select 3, cast('2024-01-02 11:00:00' as timestamp), 'c'
union all select 4, cast('2024-01-03 10:00:00' as timestamp), {{ "'d'" if var('run', 1) == 1 else "'D'" }}
{% if var('run', 1) == 2 %} union all select 5, cast('2024-01-03 12:00:00' as timestamp), 'e' {% endif %}
"""
BATCHED = """{{ config(materialized='incremental', incremental_strategy='microbatch', file_format='paimon',
                      event_time='ts', batch_size='day', begin='2024-01-01') }}
select * from {{ ref('events_source') }}
"""


class TestMicrobatch:
    @pytest.fixture(scope="class")
    def models(self):
        return {"events_source.sql": EVENTS_SOURCE, "batched.sql": BATCHED}

    def test_each_batch_replaces_its_day(self, project):
        days = ["--event-time-start", "2024-01-01", "--event-time-end", "2024-01-04"]
        run_dbt(["run", *days])
        table = _table(project, "batched")
        assert table.schema.is_append
        first = sorted(tuple(r) for r in project.run_sql(f"select id, v from {project.test_schema}.batched",
                                                         fetch="all"))
        assert first == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
        # day 3 changes upstream; only its batch runs again: day 3 replaced, the others kept
        run_dbt(["run", "--select", "events_source", "--vars", "{run: 2}"])
        run_dbt(["run", "--select", "batched", "--vars", "{run: 2}", "--event-time-start", "2024-01-03",
                 "--event-time-end", "2024-01-04"])
        got = sorted(tuple(r) for r in project.run_sql(f"select id, v from {project.test_schema}.batched",
                                                       fetch="all"))
        assert got == [(1, "a"), (2, "b"), (3, "c"), (4, "D"), (5, "e")]
        table = _table(project, "batched")
        assert table.latest_snapshot().commit_kind == "OVERWRITE"
        assert sorted((r["id"], r["v"]) for r in pypaimon_read(table.path).to_pylist()) == got


KEYED_OVERWRITE = ("{{ config(materialized='incremental', file_format='paimon', unique_key=['id', 'dt'], "
                   "partition_by='dt', options={'bucket': '2'}, incremental_strategy='insert_overwrite') }}" + ROWS)
KEYED_DELETE_INSERT = ("{{ config(materialized='incremental', file_format='paimon', unique_key=['id', 'dt'], "
                       "partition_by='dt', incremental_strategy='delete+insert') }}" + ROWS)
# the key is id alone (a cross-partition table): run 2 moves id 1 from d1 into the replaced d2
MOVING_ROWS = """
{% if var('run', 1) == 1 %}
select 1 as id, 'd1' as dt, 10 as v union all select 2, 'd1', 20 union all select 3, 'd2', 30
{% else %}
select 1 as id, 'd2' as dt, 11 as v union all select 5, 'd3', 50
{% endif %}
"""
CROSS_OVERWRITE = ("{{ config(materialized='incremental', file_format='paimon', unique_key='id', "
                   "partition_by='dt', incremental_strategy='insert_overwrite') }}" + MOVING_ROWS)
MERGING_OVERWRITE = ("{{ config(materialized='incremental', file_format='paimon', unique_key=['id', 'dt'], "
                     "partition_by='dt', options={'merge-engine': 'partial-update'}, "
                     "incremental_strategy='insert_overwrite') }}" + ROWS)


class TestKeyTableStrategies:
    """The same rows into primary-key tables: insert_overwrite replaces the run's partitions (a key of
    them the run lacks is deleted) in one snapshot; delete+insert is the deduplicate table's upsert."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"keyed_overwrite.sql": KEYED_OVERWRITE, "keyed_delete_insert.sql": KEYED_DELETE_INSERT,
                "cross_overwrite.sql": CROSS_OVERWRITE, "merging_overwrite.sql": MERGING_OVERWRITE}

    def test_insert_overwrite_and_delete_insert_on_key_tables(self, project):
        run_dbt(["run"])
        results = run_dbt(["run", "--vars", "{run: 2}"]).results
        assert {r.node.name: r.adapter_response["code"] for r in results} == {
            "keyed_overwrite": "INSERT OVERWRITE", "keyed_delete_insert": "UPSERT",
            "cross_overwrite": "INSERT OVERWRITE", "merging_overwrite": "INSERT OVERWRITE"}
        # d2 and d3 replaced: id 3 deleted, id 1 moved out of d1 (which is kept: id 2)
        assert _spark_rows(project, "cross_overwrite") == [(1, "d2", 11), (2, "d1", 20), (5, "d3", 50)]
        assert _table(project, "cross_overwrite").latest_snapshot().id == 2
        # partial-update: d2 overwritten as Paimon's INSERT OVERWRITE does
        assert _spark_rows(project, "merging_overwrite") == _spark_rows(project, "keyed_overwrite")
        assert _table(project, "merging_overwrite").latest_snapshot().commit_kind == "OVERWRITE"
        # d2 replaced: id 3 (there, not in run 2) deleted; d1 kept; d3 added
        assert _spark_rows(project, "keyed_overwrite") == [(1, "d1", 10), (2, "d1", 20), (4, "d2", 40), (5, "d3", 50)]
        assert _spark_rows(project, "keyed_delete_insert") == [(1, "d1", 10), (2, "d1", 20), (3, "d2", 30),
                                                               (4, "d2", 40), (5, "d3", 50)]
        table = _table(project, "keyed_overwrite")
        assert table.latest_snapshot().id == 2 and table.schema.primary_keys == ("id", "dt")
        assert sorted((r["id"], r["dt"], r["v"]) for r in pypaimon_read(table.path).to_pylist()) == \
            _spark_rows(project, "keyed_overwrite")
