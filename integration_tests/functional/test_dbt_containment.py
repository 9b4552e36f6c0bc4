"""A dbt name never reaches files outside the warehouse (issue 11, item 1).

A sacrificial directory next to the warehouse holds a real Paimon table. Every attempt to reach it
through dbt (model aliases and schemas with `..`, `/`, `\\`, absolute paths; run-operation
`relation` arguments; adapter.drop_relation / drop_schema; symbolic links inside the warehouse
pointing at it) is refused with a clear error, and the directory stays byte-identical."""

import os

import pyarrow as pa
import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture
from dbt_common.exceptions import DbtRuntimeError

from dbt_paimon.store import FileStoreTable
from tests.files import fingerprint

VICTIM_ROWS = [{"id": i, "v": f"keep-{i}"} for i in range(5)]

DROP_MACROS = """
{% macro try_drop_relation(schema, identifier) %}
  {% do adapter.drop_relation(api.Relation.create(schema=schema, identifier=identifier, type='table')) %}
{% endmacro %}
{% macro try_drop_schema(schema) %}
  {% do adapter.drop_schema(api.Relation.create(schema=schema)) %}
{% endmacro %}
{% macro try_create_schema(schema) %}
  {% do adapter.create_schema(api.Relation.create(schema=schema)) %}
{% endmacro %}
"""

MODEL = "{{{{ config(materialized='paimon_upsert', unique_key='id', {config}) }}}} select 1 as id, 'x' as v"


@pytest.fixture(scope="class")
def victim(paimon_home):
    """<home>/victim/db.db/t: a Paimon table beside the warehouse <home>/warehouse."""
    path = str(paimon_home / "victim" / "db.db" / "t")
    if not FileStoreTable.exists(path):
        schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
        table = FileStoreTable.create(path, schema, primary_keys=["id"], options={"bucket": "1"})
        w = table.new_write()
        w.write(pa.Table.from_pylist(VICTIM_ROWS, schema), buckets=0)
        w.commit()
    return str(paimon_home / "victim")


class TestNamesStayInsideTheWarehouse:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "dotdot_alias.sql": MODEL.format(config="alias='../../victim/db.db/t'"),
            "absolute_alias.sql": MODEL.format(config="alias='/tmp/dbt_paimon_absolute_target'"),
            "backslash_alias.sql": MODEL.format(config="alias='a\\\\..\\\\b'"),
            "dollar_alias.sql": MODEL.format(config="alias='t$snapshots'"),
            "linked.sql": MODEL.format(config="alias='linked'"),
            "fine.sql": MODEL.format(config="alias='fine'"),
        }

    @pytest.fixture(scope="class")
    def macros(self):
        return {"drops.sql": DROP_MACROS}

    def _refused(self, args, *expected):
        try:
            _, log = run_dbt_and_capture(args, expect_pass=False)
        except DbtRuntimeError as e:  # `dbt show` raises what its query's macros refused
            log = str(e)
        for text in expected:
            assert text in log, log
        return log

    def test_every_attempt_is_refused_and_the_victim_survives(self, project, victim):
        warehouse = project.adapter.credentials.warehouse
        schema = project.test_schema
        # symbolic links inside the warehouse pointing outside it: a table and a whole database
        os.makedirs(os.path.join(warehouse, f"{schema}.db"), exist_ok=True)
        os.symlink(os.path.join(victim, "db.db", "t"), os.path.join(warehouse, f"{schema}.db", "linked"))
        os.symlink(os.path.join(victim, "db.db"), os.path.join(warehouse, "linkeddb.db"))
        before = fingerprint(victim)
        assert len(before) > 5
        attempts = 0
        try:
            # models whose names would lead out of the warehouse
            results = run_dbt(["run", "--exclude", "dotdot_schema"], expect_pass=False)
            status = {r.node.name: (r.status, r.message or "") for r in results.results}
            assert status.pop("fine")[0] == "success"
            for name, (state, message) in status.items():
                attempts += 1
                assert state == "error", (name, message)
                assert "outside the warehouse" in message or "is one directory name" in message \
                    or "starts with '.'" in message or "contains" in message, (name, message)
            assert not os.path.exists("/tmp/dbt_paimon_absolute_target")

            # run-operations on relations that name the victim
            relations = ["linked", f"{schema}.linked", "linkeddb.t", "/tmp/x", "a./b", "..\\\\victim.t"]
            operations = [("paimon_delete", "where: 'true'"), ("paimon_compact", ""),
                          ("paimon_expire", "retain_max: 1"), ("paimon_create_tag", "tag: evil"),
                          ("paimon_rollback", "snapshot_id: 1"), ("paimon_delete_tag", "tag: evil"),
                          ("paimon_remove_orphan_files", "older_than: '0 s'")]
            for relation in relations:
                for op, args in operations:
                    attempts += 1
                    self._refused(["run-operation", op, "--args", f"{{relation: '{relation}', {args}}}"],
                                  "Encountered an error while running operation")
            # the reads: time travel and system tables
            for relation in ("linked", "linkeddb.t"):
                attempts += 2
                self._refused(["show", "--inline",
                               f"select * from {{{{ paimon_as_of('{relation}', snapshot_id=1) }}}}"],
                              "outside the warehouse")
                self._refused(["show", "--inline",
                               f"select * from {{{{ paimon_system_table('{relation}', 'files') }}}}"],
                              "outside the warehouse")
            # adapter.drop_relation / drop_schema / create_schema
            for schema_name, identifier in [("linkeddb", "t"), (schema, "linked"), ("..", "victim"),
                                            ("../victim/db", "t"), (schema, "../../../victim/db.db/t"),
                                            (schema, "/abs")]:
                attempts += 1
                self._refused(["run-operation", "try_drop_relation", "--args",
                               f"{{schema: '{schema_name}', identifier: '{identifier}'}}"])
            for schema_name in ["linkeddb", "../victim/db", "..", "a/b", ".spark"]:
                attempts += 2
                self._refused(["run-operation", "try_drop_schema", "--args", f"{{schema: '{schema_name}'}}"])
                self._refused(["run-operation", "try_create_schema", "--args", f"{{schema: '{schema_name}'}}"])
        finally:
            os.unlink(os.path.join(warehouse, f"{schema}.db", "linked"))
            os.unlink(os.path.join(warehouse, "linkeddb.db"))
        assert fingerprint(victim) == before
        assert sorted(FileStoreTable.open(os.path.join(victim, "db.db", "t")).to_arrow().to_pylist(),
                      key=lambda r: r["id"]) == VICTIM_ROWS
        print(f"{attempts} attempts refused; {len(before)} files and directories kept")
        assert attempts >= 60

    def test_the_messages_name_the_problem(self, project):
        log = self._refused(["run-operation", "paimon_compact", "--args", "{relation: '/etc/passwd'}"])
        assert "contains '/'" in log and "never a path" in log
        log = self._refused(["run", "--select", "dollar_alias"])
        assert "Paimon's system-table separator" in log


class TestASchemaLeadingOutStopsTheRun:
    """dbt lists every schema of the project before it runs anything: one that leads out of the
    warehouse stops the run there, in words."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"dotdot_schema.sql": MODEL.format(config="schema='../../victim'"),
                "fine.sql": MODEL.format(config="alias='fine'")}

    def test_refused_before_any_model_runs(self, project, victim):
        before = fingerprint(victim)
        with pytest.raises(DbtRuntimeError) as refused:  # dbt stops the whole run at its schema listing
            run_dbt(["run"])
        log = str(refused.value)
        assert "contains '/'" in log and "never a path" in log, log
        assert not FileStoreTable.exists(project.adapter.paimon_table_path(
            project.adapter.Relation.create(schema=project.test_schema, identifier="fine")))
        assert fingerprint(victim) == before
