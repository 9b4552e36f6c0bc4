"""dbt on a warehouse in an object store (issue 12): `warehouse: s3://...` with the store's settings
in the profile by Paimon's names. paimon_upsert models with keys moving partitions, a `table` model
reading them, every maintenance operation, time travel and system tables, a full refresh; pypaimon
reads the same tables from the S3 server. The secret key never reaches dbt's logs, run results,
`dbt debug` output or the tables' stored options."""

import glob
import json
import os
import uuid

import pytest
from dbt.tests.util import run_dbt_and_capture

from tests.s3 import BUCKET
from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.common.fileio import FileIO
from tests.oracle import pypaimon_read

CUSTOMERS = """
{{ config(materialized='paimon_upsert', unique_key='id', partition_by='dt') }}
{% if var('batch', 1) == 1 %}
select cast(id as int) as id, concat('d', cast(id % 3 as string)) as dt, cast(id as int) as v from range(0, 9)
{% else %}
select cast(id as int) as id, 'moved' as dt, cast(id * 10 as int) as v from range(0, 4)
{% endif %}
"""
REPORT = "{{ config(materialized='table') }} select dt, count(*) as n from {{ ref('customers') }} group by dt"
HISTORY = """{{ config(materialized='table') }}
select snapshot_id, commit_kind from {{ paimon_system_table(ref('customers'), 'snapshots') }}"""
FIRST = "{{ config(materialized='table') }} select * from {{ paimon_as_of(ref('customers'), snapshot_id=1) }}"


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # dbt-tests-adapter logs there


def _rows(path):
    return sorted(tuple(r.values()) for r in pypaimon_read(path).to_pylist())


class TestDbtOnAnObjectStore:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, s3_server, spark_dir):
        # the same Spark (catalog dir, master) as the rest of the suite: one SparkSession per process
        return {
            "type": "paimon", "warehouse": f"s3://{BUCKET}/dbt-{uuid.uuid4().hex[:8]}/wh", "spark_dir": spark_dir,
            "master": "local[2]", "threads": 1, "storage_options": s3_server.options,
            "server_side_parameters": {"spark.sql.shuffle.partitions": "4",
                                       "spark.sql.storeAssignmentPolicy": "LEGACY"},
        }

    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": CUSTOMERS, "report.sql": REPORT, "history.sql": HISTORY, "first.sql": FIRST}

    def test_models_maintenance_and_secrets(self, project, s3_server):
        schema = project.test_schema
        adapter = project.adapter
        path = adapter.paimon_table_path(adapter.Relation.create(schema=schema, identifier="customers"))
        assert path.startswith(f"s3://{BUCKET}/") and path.endswith(f"{schema}.db/customers")
        logs = []

        def dbt(*args):
            _, log = run_dbt_and_capture(list(args))
            logs.append(log)
            return log

        dbt("run", "--select", "customers")
        dbt("run", "--select", "customers", "--vars", "batch: 2")
        expected = sorted([(i, "moved", i * 10) for i in range(4)] + [(i, f"d{i % 3}", i) for i in range(4, 9)])
        assert _rows(path) == expected
        dbt("run", "--select", "report", "history", "first")
        report = dict(project.run_sql(f"select dt, n from {schema}.report", fetch="all"))
        assert report == {"moved": 4, "d1": 2, "d2": 2, "d0": 1}
        assert project.run_sql(f"select snapshot_id, commit_kind from {schema}.history order by 1",
                               fetch="all") == [(1, "APPEND"), (2, "APPEND")]
        assert len(project.run_sql(f"select * from {schema}.first", fetch="all")) == 9

        # maintenance, each on the store
        rel = f"{schema}.customers"
        dbt("run-operation", "paimon_create_tag", "--args", f"{{relation: {rel}, tag: two}}")
        assert "DELETE 4 from" in dbt("run-operation", "paimon_delete", "--args",
                                      f"{{relation: {rel}, where: \"dt = 'moved'\"}}")
        assert "COMPACT" in dbt("run-operation", "paimon_compact", "--args", f"{{relation: {rel}}}")
        assert "snapshot(s) 1-3 expired" in dbt("run-operation", "paimon_expire", "--args",
                                                f"{{relation: {rel}, retain_max: 1}}")
        assert _rows(path) == [r for r in expected if r[1] != "moved"]
        orphan = f"{path}/dt=d0/bucket-0/data-killed-writer-0.parquet"
        FileIO.get(path).write_bytes(orphan, b"x" * 64)
        assert "would delete 1 file(s), 64 bytes" in dbt(
            "run-operation", "paimon_remove_orphan_files", "--args",
            f"{{relation: {rel}, older_than: '0 s', dry_run: true}}")
        assert "deleted 1 file(s)" in dbt(
            "run-operation", "paimon_remove_orphan_files", "--args", f"{{relation: {rel}, older_than: '0 s'}}")
        assert "ROLLBACK" in dbt("run-operation", "paimon_rollback", "--args", f"{{relation: {rel}, tag: two}}")
        assert _rows(path) == expected
        assert FileStoreTable.open(path).latest_snapshot().id == 2

        # a full refresh rebuilds the table in place (the store has no rename: staged, then copied)
        dbt("run", "--select", "customers", "--full-refresh")
        assert _rows(path) == sorted((i, f"d{i % 3}", i) for i in range(9))
        assert FileStoreTable.open(path).latest_snapshot().id == 1

        # the secret is nowhere: logs, run results, debug output, stored schema
        debug = dbt("debug")
        assert "storage_options" not in debug or s3_server.secret_key not in debug
        with open(os.path.join(project.project_root, "target", "run_results.json")) as f:
            results = f.read()
        file_log = ""
        for name in glob.glob(os.path.join(REPO, "logs", "*", "dbt.log")):
            with open(name) as f:
                text = f.read()
            if schema in text:
                file_log += text
        assert file_log
        stored = FileIO.get(path).read_text(f"{path}/schema/schema-0")
        for text in logs + [results, file_log, stored]:
            assert s3_server.secret_key not in text
        assert json.loads(stored)["options"] == {"bucket": "-1"} or "s3." not in stored
