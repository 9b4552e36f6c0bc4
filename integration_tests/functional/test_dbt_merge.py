"""Saying "Paimon" the way a dbt-spark or Databricks user does (issue 13, items 0 and 2):
file_format='paimon' on `table` and `incremental` models, incremental_strategy='merge' as an upsert
on unique_key, and the merge strategy's column rules (merge_update_columns, merge_exclude_columns,
incremental_predicates), with keys moving partitions. Every table is read back by pypaimon; a refused
config leaves the table's files byte-identical.

dbt-tests-adapter's BaseMergeExcludeColumns runs unchanged. Its BaseIncrementalPredicates is not used:
it expects two rows of one unique_key after the run (delete+insert skipping a row the predicate
excludes), which a Paimon primary-key table can never hold; our predicates test below states what
a primary key makes of it instead.
"""

import pathlib

import pytest
from dbt.tests.adapter.incremental.test_incremental_merge_exclude_columns import BaseMergeExcludeColumns
from dbt.tests.util import run_dbt, run_dbt_and_capture

from dbt_paimon.store import FileStoreTable
from tests.files import fingerprint
from tests.oracle import pypaimon_read


def _path(project, name):
    return f"{project.adapter.credentials.warehouse}/{project.test_schema}.db/{name}"


def _rows(project, name, key="id"):
    return sorted(pypaimon_read(_path(project, name)).to_pylist(), key=lambda r: r[key])


class TestMergeExcludeColumnsPaimon(BaseMergeExcludeColumns):
    """Upstream's model and expectations: incremental_strategy='merge' is an upsert into Paimon."""

    def test__merge_exclude_columns(self, project):
        super().test__merge_exclude_columns(project)
        assert FileStoreTable.exists(_path(project, "merge_exclude_columns"))
        assert _rows(project, "merge_exclude_columns") == [
            {"id": 1, "msg": "hello", "color": "blue"}, {"id": 2, "msg": "goodbye", "color": "green"},
            {"id": 3, "msg": "anyway", "color": "purple"}]


# batch 1 creates; batch 2: id 1 stays in 'a', id 2 moves a -> b, id 3 moves b -> c, id 4 is new
BATCHES = {
    1: "(1, 'a', 'ann', 10), (2, 'a', 'bob', 20), (3, 'b', 'cid', 30)",
    2: "(1, 'a', 'ANN', 11), (2, 'b', 'BOB', 21), (3, 'c', 'CID', 31), (4, 'c', 'dee', 40)",
}


def _model(config: str) -> str:
    return ("{{ config(" + config + ") }}\n"
            "{% set batches = " + repr(BATCHES) + " %}\n"
            "select * from values {{ batches[var('batch')] }} as src(id, dt, name, v)\n")


MODELS = {
    "table_model.sql": _model("materialized='table', file_format='paimon', unique_key='id', partition_by='dt'"),
    "merged.sql": _model("materialized='incremental', incremental_strategy='merge', unique_key='id', "
                         "partition_by='dt'"),
    "by_format.sql": _model("materialized='incremental', file_format='paimon', unique_key='id', partition_by='dt'"),
    "update_cols.sql": _model("materialized='incremental', incremental_strategy='merge', unique_key='id', "
                              "partition_by='dt', merge_update_columns=['v']"),
    "update_cols_moving.sql": _model("materialized='incremental', incremental_strategy='merge', unique_key='id', "
                                     "partition_by='dt', merge_update_columns=['dt', 'v']"),
    "exclude_cols.sql": _model("materialized='incremental', incremental_strategy='merge', unique_key='id', "
                               "partition_by='dt', merge_exclude_columns=['name']"),
    "predicated.sql": _model("materialized='incremental', incremental_strategy='merge', unique_key='id', "
                             "partition_by='dt', merge_update_columns=['v'], "
                             "incremental_predicates=[\"DBT_INTERNAL_DEST.dt = 'a'\"]"),
    # predicates on a column the run overwrites, and on the model's rows, as dbt-spark's MERGE ON takes them
    "predicated_both.sql": _model("materialized='incremental', incremental_strategy='merge', unique_key='id', "
                                  "partition_by='dt', merge_update_columns=['v'], incremental_predicates="
                                  "[\"DBT_INTERNAL_DEST.v < 25\", \"DBT_INTERNAL_SOURCE.name <> 'BOB'\"]"),
}


class TestPaimonFormatsAndMerge:
    @pytest.fixture(scope="class")
    def models(self):
        return MODELS

    @pytest.fixture(scope="class")
    def built(self, project):
        run_dbt(["run", "--vars", "batch: 1"])
        snapshots = {name[:-4]: FileStoreTable.open(_path(project, name[:-4])).latest_snapshot().id for name in MODELS}
        run_dbt(["run", "--vars", "batch: 2"])
        return snapshots

    def test_a_paimon_table_model_is_rebuilt_each_run(self, project, built):
        rows = _rows(project, "table_model")
        assert [(r["id"], r["dt"], r["name"]) for r in rows] == [
            (1, "a", "ANN"), (2, "b", "BOB"), (3, "c", "CID"), (4, "c", "dee")]
        # a new table each run, not an upsert into the old one: its first snapshot holds batch 2
        assert FileStoreTable.open(_path(project, "table_model")).latest_snapshot().id == 1

    @pytest.mark.parametrize("name", ["merged", "by_format"])
    def test_merge_and_file_format_paimon_upsert_on_unique_key(self, project, built, name):
        assert [(r["id"], r["dt"], r["name"], r["v"]) for r in _rows(project, name)] == [
            (1, "a", "ANN", 11), (2, "b", "BOB", 21), (3, "c", "CID", 31), (4, "c", "dee", 40)]
        assert FileStoreTable.open(_path(project, name)).latest_snapshot().id == built[name] + 1

    def test_merge_update_columns_update_only_those_columns(self, project, built):
        # dt is not updated: every matched key stays in its partition, name keeps the stored value
        assert [(r["id"], r["dt"], r["name"], r["v"]) for r in _rows(project, "update_cols")] == [
            (1, "a", "ann", 11), (2, "a", "bob", 21), (3, "b", "cid", 31), (4, "c", "dee", 40)]

    def test_a_partition_column_among_the_update_columns_moves_the_key(self, project, built):
        assert [(r["id"], r["dt"], r["name"], r["v"]) for r in _rows(project, "update_cols_moving")] == [
            (1, "a", "ann", 11), (2, "b", "bob", 21), (3, "c", "cid", 31), (4, "c", "dee", 40)]

    def test_merge_exclude_columns_keep_the_stored_values(self, project, built):
        assert [(r["id"], r["dt"], r["name"], r["v"]) for r in _rows(project, "exclude_cols")] == [
            (1, "a", "ann", 11), (2, "b", "bob", 21), (3, "c", "cid", 31), (4, "c", "dee", 40)]

    def test_incremental_predicates_narrow_the_rows_a_run_matches(self, project, built):
        # ids 1 and 2 live in 'a' (the predicate holds): matched, only v updates. id 3 lives in 'b':
        # not matched, so its row is written whole (the primary key keeps it one row, in 'c').
        assert [(r["id"], r["dt"], r["name"], r["v"]) for r in _rows(project, "predicated")] == [
            (1, "a", "ann", 11), (2, "a", "bob", 21), (3, "c", "CID", 31), (4, "c", "dee", 40)]

    def test_incremental_predicates_on_an_updated_column_and_on_the_models_rows(self, project, built):
        # id 1: stored v 10 < 25 and the model's name is not BOB: matched, only v updates. id 2: its
        # model row is BOB's, id 3: stored v 30: not matched, written whole
        assert [(r["id"], r["dt"], r["name"], r["v"]) for r in _rows(project, "predicated_both")] == [
            (1, "a", "ann", 11), (2, "b", "BOB", 21), (3, "c", "CID", 31), (4, "c", "dee", 40)]


BAD = {
    "both": "materialized='incremental', incremental_strategy='merge', unique_key='id', partition_by='dt', "
            "merge_update_columns=['v'], merge_exclude_columns=['name']",
    "missing": "materialized='incremental', incremental_strategy='merge', unique_key='id', partition_by='dt', "
               "merge_update_columns=['nope']",
    "delete_insert": "materialized='incremental', file_format='paimon', incremental_strategy='delete+insert', "
                     "unique_key='id', partition_by='dt', options={'merge-engine': 'partial-update'}",
    "append": "materialized='incremental', file_format='paimon', incremental_strategy='append', "
              "unique_key='id', partition_by='dt'",
    "predicate": "materialized='incremental', incremental_strategy='merge', unique_key='id', partition_by='dt', "
                 "merge_update_columns=['v'], incremental_predicates=['DBT_INTERNAL_DEST.nope >']",
}
MESSAGES = {
    "both": "give merge_update_columns or merge_exclude_columns, not both",
    "missing": "nope",
    "delete_insert": "incremental_strategy 'delete+insert' replaces a key's row whole, which a table with "
                     "merge-engine 'partial-update' does not do",
    "append": "incremental_strategy 'append' keeps every row, which a table with a primary key cannot",
    "predicate": "incremental_predicates",
}


class TestRefusedMergeConfigs:
    @pytest.fixture(scope="class")
    def models(self):
        return {"target.sql": _model("materialized='incremental', incremental_strategy='merge', unique_key='id', "
                                     "partition_by='dt'")}

    @pytest.mark.parametrize("case", sorted(BAD))
    def test_a_refused_config_writes_nothing(self, project, case):
        run_dbt(["run", "--vars", "batch: 1"])
        path = _path(project, "target")
        before = fingerprint(path)
        (pathlib.Path(project.project_root) / "models" / "target.sql").write_text(_model(BAD[case]))
        result, output = run_dbt_and_capture(["run", "--vars", "batch: 2"], expect_pass=False)
        assert MESSAGES[case] in output
        assert fingerprint(path) == before
        assert [r["v"] for r in _rows(project, "target")] == [10, 20, 30]
        (pathlib.Path(project.project_root) / "models" / "target.sql").write_text(
            _model("materialized='incremental', incremental_strategy='merge', unique_key='id', partition_by='dt'"))
