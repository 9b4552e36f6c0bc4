"""`dbt run` with `master: spark://...` in the profile: the paimon_upsert model runs on the cluster's
executors, whose Python has not got dbt_paimon (the adapter ships it when its session starts).

The project is generated here; dbt runs in a child process (integration_tests' project_runner)
over two batches, the second moving a key to another partition, then `dbt show` reads the table
through Spark; pypaimon reads the result.
"""

from __future__ import annotations

import json
import os
import textwrap
import uuid

import pytest

from tests.cluster import events
from tests.cluster.standalone import run_child
from dbt_paimon.store.common import fileio
from tests.oracle import pypaimon_read, rows
from tests.s3 import BUCKET

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNNER = os.path.join(ROOT, "integration_tests", "functional", "project_runner.py")

MODEL = """\
{{ config(materialized='paimon_upsert', unique_key='customer_id', partition_by='country') }}
{% if var('batch') == 1 %}
select * from values (1L, 'ann', 'NL'), (2L, 'bob', 'DE'), (3L, 'cy', 'FR') as t(customer_id, name, country)
{% else %}
select * from values (2L, 'bob', 'FR'), (4L, 'di', 'NL') as t(customer_id, name, country)
{% endif %}
"""


def _project(root, master: str, warehouse: str, storage: dict) -> None:
    (root / "models").mkdir(parents=True)
    (root / "models" / "customers.sql").write_text(MODEL)
    (root / "dbt_project.yml").write_text(textwrap.dedent("""\
        name: cluster_demo
        version: "1.0"
        config-version: 2
        profile: cluster_demo
        """))
    (root / "profiles.yml").write_text(textwrap.dedent(f"""\
        cluster_demo:
          target: dev
          outputs:
            dev:
              type: paimon
              schema: analytics
              warehouse: {warehouse}
              storage_options: {json.dumps(storage)}
              spark_dir: {root / "spark"}
              master: {master}
              threads: 1
              server_side_parameters:
                spark.executor.memory: 512m
                spark.executor.cores: "1"
                spark.cores.max: "2"
                spark.driver.host: 127.0.0.1
                spark.driver.bindAddress: 127.0.0.1
                spark.sql.shuffle.partitions: "4"
                spark.eventLog.enabled: "true"
                spark.eventLog.compress: "false"
                spark.eventLog.dir: file:{root / "events"}
        """))
    (root / "events").mkdir()


@pytest.fixture(scope="module")
def dbt_run(cluster, executor_pythons, tmp_path_factory, s3_server):
    root = tmp_path_factory.mktemp("dbt-on-cluster")
    warehouse = f"s3://{BUCKET}/dbt-cluster-{uuid.uuid4().hex[:8]}/wh"
    fileio.configure(s3_server.options)  # this process reads the results back from the store
    _project(root, cluster.master_url, warehouse, s3_server.options)
    report = run_child(cluster, [RUNNER, str(root), str(root / "report.json"), "run:1", "run:2", "show"], cwd=str(root),
                       python=executor_pythons["full"], report=str(root / "report.json"))
    return root, report, warehouse


def test_dbt_run_upserts_on_the_cluster(dbt_run):
    root, report, warehouse = dbt_run
    assert [(r["batch"], r["status"]) for r in report["runs"]] == [(1, "success"), (2, "success")]
    assert report["runs"][0]["message"].startswith("UPSERT 3: 3 inserted, 0 updated")
    assert report["runs"][1]["message"].startswith("UPSERT 2: 1 inserted, 0 updated, 1 moved")
    table = f"{warehouse}/analytics.db/customers"
    assert rows(pypaimon_read(table), "customer_id") == [
        {"customer_id": 1, "name": "ann", "country": "NL"}, {"customer_id": 2, "name": "bob", "country": "FR"},
        {"customer_id": 3, "name": "cy", "country": "FR"}, {"customer_id": 4, "name": "di", "country": "NL"}]
    # dbt show reads the table through its Spark source: planned by the executors' Python on this
    # host, read by the executors
    assert report["show"] == [["1", "NL"], ["2", "FR"], ["3", "FR"], ["4", "NL"]]


def test_dbt_models_ran_on_both_executors_with_the_shipped_code(dbt_run, cluster):
    root, _, _ = dbt_run
    [app] = [n.removeprefix("eventlog_v2_") for n in os.listdir(root / "events") if n.startswith("eventlog_v2_")]
    seen = events.python_tasks(str(root / "events"), app)
    assert set(seen["tasks_per_executor"]) == {"0", "1"}
    assert "dbt-paimon: check the executors' Python" in seen["job_descriptions"]
    # each executor fetched the zip the adapter shipped (into its working directory)
    fetched = [n for w in ("worker-0", "worker-1") for d in os.listdir(os.path.join(cluster.home, w, app))
               for n in os.listdir(os.path.join(cluster.home, w, app, d)) if n.startswith("dbt_paimon-")]
    assert len(fetched) == 2 and fetched[0] == fetched[1] and fetched[0].endswith(".zip")
