"""The integration project (integration_tests/) across three batches, as a user runs it, on an object
store (`target: lake`: its warehouse on the session's S3 server): dbt seed, then dbt run per batch,
and dbt test after the batches that update and move keys (2 and 3; the first only inserts). Batches
1-2 run in one process; batch 3, dbt show and dbt docs in a fresh one, which must find the Paimon
tables, their catalog entries and the seeds again. Finally pypaimon reads the tables from the server
and they are compared with the expected rows and with our own reader. (The demo runs this project on
a local warehouse, as most of the dbt tests run theirs.)"""

import csv
import json
import os
import shutil
import subprocess
import sys
from decimal import Decimal

import pytest

from dbt_paimon.store import FileStoreTable
from tests.oracle import pypaimon_read

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # project_runner
PROJECT = os.path.dirname(HERE)
SCHEMA = "customers_demo"

EXPECTED_MESSAGES = {
    (1, "customers"): "UPSERT 6: 6 inserted, 0 updated",
    (2, "customers"): "UPSERT 5: 2 inserted, 1 updated, 2 moved",
    (3, "customers"): "UPSERT 5: 1 inserted, 1 updated, 2 moved, 1 skipped",
    (1, "customer_profiles"): "UPSERT 3: 3 inserted, 0 updated",
    (2, "customer_profiles"): "UPSERT 3: 1 inserted, 2 updated",
    (3, "customer_profiles"): "UPSERT 3: 1 inserted, 2 updated",
    (1, "customer_order_totals"): "UPSERT 2: 2 inserted, 0 updated",
    (2, "customer_order_totals"): "UPSERT 3: 2 inserted, 1 updated",
    (3, "customer_order_totals"): "UPSERT 2: 1 inserted, 1 updated",
    (1, "customer_first_seen"): "UPSERT 6: 6 inserted, 0 updated",
    (2, "customer_first_seen"): "UPSERT 5: 2 inserted, 0 updated, 3 skipped",
    (3, "customer_first_seen"): "UPSERT 5: 1 inserted, 0 updated, 4 skipped",
}


def _child(project_dir, out, env, steps):
    """Steps in a child process (its own SparkSession and Python data sources)."""
    proc = subprocess.run([sys.executable, os.path.join(HERE, "project_runner.py"), str(project_dir), str(out),
                           *steps], env={**os.environ, "PYSPARK_PYTHON": sys.executable, **env},
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    with open(out) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def project_dir(tmp_path_factory):
    """A copy of the integration project (its warehouse, target and logs stay out of the repo)."""
    target = tmp_path_factory.mktemp("project") / "integration_tests"
    shutil.copytree(PROJECT, target, ignore=shutil.ignore_patterns(
        "functional", "conftest.py", "__pycache__", "target", "logs", "paimon_warehouse", ".gitignore"))
    return target


def test_three_batches_across_two_processes_on_an_object_store(project_dir, tmp_path, spark_dir, monkeypatch,
                                                               s3_warehouse, s3_server):
    """Batches 1-2 in a child process; batch 3, dbt show and dbt docs in this one, which did not build
    the tables: Spark's catalog (persisted by the child) names providers this process must register
    from the warehouse. If Spark already runs here (this test not run first), both halves run in
    children with a catalog dir of their own. No report carries the secret key."""
    from pyspark.sql import SparkSession

    import project_runner

    here = SparkSession.getActiveSession() is None and getattr(SparkSession, "_instantiatedSession", None) is None
    env = {"DBT_TARGET": "lake", "DBT_PAIMON_SCHEMA": SCHEMA, "DBT_PAIMON_WAREHOUSE": s3_warehouse,
           # the catalog this process's SparkSession will open, or the children's own
           "DBT_PAIMON_SPARK_DIR": spark_dir if here else str(tmp_path / "spark"),
           "DBT_PAIMON_S3_ENDPOINT": s3_server.endpoint, "DBT_PAIMON_S3_ACCESS_KEY": s3_server.access_key,
           "DBT_PAIMON_S3_SECRET_KEY": s3_server.secret_key}
    first = _child(project_dir, tmp_path / "first.json", env, ["seed", "run:1", "run:2", "test:2"])
    later_steps = ["run:3", "test:3", "show", "docs"]
    if here:
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        project_runner.main(str(project_dir), str(tmp_path / "later.json"), later_steps)
        with open(tmp_path / "later.json") as f:
            later = json.load(f)
    else:
        later = _child(project_dir, tmp_path / "later.json", env, later_steps)
    assert s3_server.secret_key not in json.dumps(first) + json.dumps(later)

    runs = first["runs"] + later["runs"]
    assert all(r["status"] == "success" for r in runs)
    upserts = {(r["batch"], r["model"]): r for r in runs if r["message"].startswith("UPSERT")}
    assert {k: r["message"] for k, r in upserts.items()} == EXPECTED_MESSAGES
    assert upserts[(3, "customers")]["adapter_response"]["rows_affected"] == 4
    assert upserts[(3, "customers")]["adapter_response"]["snapshot_id"] == 3
    # every generic and singular test passed after batches 2 and 3
    assert [(t["batch"], t["passed"] == t["total"]) for t in first["tests"] + later["tests"]] == [(2, True), (3, True)]
    assert later["tests"][0]["total"] == 23

    # dbt show and dbt docs from the fresh process read the Paimon table through the catalog
    assert later["show"] == [["1", "NL"], ["2", "DE"], ["3", "FR"], ["4", "NL"], ["5", "NL"], ["6", "DE"],
                             ["7", "FR"], ["8", "FR"], ["9", "BE"]]
    customers = later["catalog"]["customers"]
    assert customers["type"] == "table"
    assert customers["comment"].startswith("One row per customer")
    assert customers["columns"]["customer_id"] == ["bigint", "Primary key."]
    assert customers["columns"]["lifetime_value"] == ["decimal(12,2)", "Lifetime value in EUR."]
    assert customers["columns"]["updated_at"][0] == "timestamp"

    _check_tables(project_dir, s3_warehouse)


def _check_tables(project_dir, warehouse: str) -> None:
    """pypaimon reads the tables dbt produced, as expected and as our reader does."""
    path = f"{warehouse}/{SCHEMA}.db/customers"
    with open(project_dir / "seeds" / "expected_customers.csv") as f:
        expected = [r for r in csv.DictReader(f) if r["after_batch"] == "3"]
    got = pypaimon_read(path).sort_by("customer_id").to_pylist()
    assert [(r["customer_id"], r["name"], r["country"], r["tier"], r["lifetime_value"], r["loaded_in_batch"])
            for r in got] == [(int(e["customer_id"]), e["name"], e["country"], e["tier"],
                               Decimal(e["lifetime_value"]), int(e["loaded_in_batch"])) for e in expected]
    for name in ("customers", "customer_profiles", "customer_order_totals", "customer_first_seen"):
        table_path = f"{warehouse}/{SCHEMA}.db/{name}"
        ours = FileStoreTable.open(table_path).to_arrow().sort_by("customer_id")
        theirs = pypaimon_read(table_path).sort_by("customer_id")
        assert theirs.to_pylist() == ours.to_pylist(), name
    order_totals = {r["customer_id"]: (r["order_count"], r["total_amount"])
                    for r in pypaimon_read(f"{warehouse}/{SCHEMA}.db/customer_order_totals").to_pylist()}
    assert order_totals == {1: (3, Decimal("37.00")), 2: (3, Decimal("105.50")), 3: (1, Decimal("99.99")),
                            7: (1, Decimal("42.00")), 9: (1, Decimal("7.50"))}
