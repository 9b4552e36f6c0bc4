"""dbt-tests-adapter's own snapshot classes on Paimon snapshots (macros/materializations/snapshot.sql,
adapter/snapshots.py), with the adaptations they need on Spark without Delta.

Every test method and assertion below is upstream's; what changes is how the *source* tables
change. Upstream runs UPDATE and DELETE on them, which Spark runs only on Delta tables (dbt-spark
runs these classes on Databricks and skips them on its session profile), and a Spark table cannot
be overwritten from itself. So each source table (and each expected table a test compares with) is
an append-only log, `<t>__log` (parquet), behind a view `<t>` showing each key's latest entry
unless that entry is a deletion: an UPDATE appends the changed rows, a DELETE appends deletion
entries, an INSERT appends rows. Each is still one statement, as the fixtures require. The
snapshots themselves are Paimon tables, written only by `dbt snapshot`; upstream's `delete from
snapshot` between tests is a Paimon delete through the adapter (paimon_delete). Postgres syntax
becomes Spark's (`TIMESTAMP '...'`, `cast(... as string)`, `interval 1 hour`), as in dbt-spark's
own adaptation of these fixtures.

Not used: basic/test_snapshot_{timestamp,check_cols}.py (their update_rows helper issues UPDATE
from inside the test method, which no fixture replaces; simple_snapshot's classes check the same
semantics), and test_various_configs.py (multi-statement Postgres SQL inside the test methods):
what it checks, snapshot_meta_column_names, dbt_valid_to_current and a list unique_key, is
checked by test_dbt_snapshots.py's TestCheckStrategy.
"""

import pytest
from dbt.tests.adapter.simple_snapshot.new_record_check_mode import BaseSnapshotNewRecordCheckMode
from dbt.tests.adapter.simple_snapshot.new_record_dbt_valid_to_current import BaseSnapshotNewRecordDbtValidToCurrent
from dbt.tests.adapter.simple_snapshot.new_record_timestamp_mode import BaseSnapshotNewRecordTimestampMode
from dbt.tests.adapter.simple_snapshot.test_snapshot import BaseSimpleSnapshot, BaseSnapshotCheck
from dbt.tests.util import get_connection, relation_from_name


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
