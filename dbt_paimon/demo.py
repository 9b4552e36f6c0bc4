"""Demo: the integration project (integration_tests/) run end to end by dbt on local Spark, then the table.

    bash run.sh demo            # = python -m dbt_paimon.demo

dbt seeds the source data, then for each batch of source rows runs the models and tests them:
customers are upserted into Paimon tables (one per merge engine), keys move between partitions
(customers moving country), stale updates are skipped. The tables are left in
integration_tests/paimon_warehouse/ for any Paimon reader; the demo ends by reading them back with
the official pypaimon and printing the table's snapshots.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.join(os.path.dirname(HERE), "integration_tests")
BATCHES = 3


def dbt(args: list[str], project_dir: str) -> "object":
    """One dbt command in this process (all of them share one SparkSession); exits on failure."""
    from dbt.cli.main import dbtRunner

    full = [*args, "--project-dir", project_dir, "--profiles-dir", project_dir]
    print(f"\n$ dbt {' '.join(args)}", flush=True)
    result = dbtRunner().invoke(full)
    if not result.success:
        print(f"dbt {args[0]} failed: {result.exception or 'see the log above'}", file=sys.stderr)
        sys.exit(1)
    return result.result


def run_project(project_dir: str, batches: int = BATCHES) -> list[dict]:
    """dbt seed, then dbt run + dbt test for each batch; returns each paimon model's run message."""
    dbt(["seed"], project_dir)
    messages = []
    for batch in range(1, batches + 1):
        results = dbt(["run", "--vars", f"{{batch: {batch}}}"], project_dir)
        for r in results:
            if r.node.config.materialized == "paimon_upsert":
                messages.append({"batch": batch, "model": r.node.name, "message": r.message,
                                 "adapter_response": r.adapter_response})
        dbt(["test", "--vars", f"{{batch: {batch}}}"], project_dir)
    return messages


def show(warehouse: str, schema: str) -> None:
    from dbt_paimon.store import FileStoreTable

    path = os.path.join(warehouse, f"{schema}.db", "customers")
    table = FileStoreTable.open(path)
    print(f"\nThe Paimon table {path}")
    print(f"  primary key {list(table.schema.primary_keys)}, partitioned by {list(table.schema.partition_keys)}, "
          f"options {dict(table.schema.options)}")
    for sid in table.snapshots.ids():
        s = table.snapshots.snapshot(sid)
        print(f"  snapshot {sid}: {s.commit_kind:<7} schema {s.schema_id}  rows {s.total_record_count:>3} "
              f"(+{s.delta_record_count} in this commit)")
    try:
        from pypaimon import CatalogFactory
    except ImportError:
        rows = table.to_arrow()
        reader = "dbt-paimon's store"
    else:
        catalog = CatalogFactory.create({"warehouse": warehouse})
        pt = catalog.get_table(f"{schema}.customers")
        rb = pt.new_read_builder()
        rows = rb.new_read().to_arrow(rb.new_scan().plan().splits())
        reader = "pypaimon (the official Python reader)"
    print(f"\ncustomers after batch {BATCHES}, read by {reader}:")
    print(rows.sort_by("customer_id").to_pandas().to_string(index=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--project-dir", default=PROJECT)
    parser.add_argument("--keep", action="store_true", help="keep the warehouse of an earlier run")
    args = parser.parse_args()
    project = os.path.abspath(args.project_dir)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    warehouse = os.environ.get("DBT_PAIMON_WAREHOUSE", "paimon_warehouse")
    warehouse = warehouse if os.path.isabs(warehouse) else os.path.join(project, warehouse)
    schema = os.environ.get("DBT_PAIMON_SCHEMA", "customers_demo")
    if not args.keep:
        shutil.rmtree(warehouse, ignore_errors=True)
    started = time.time()
    messages = run_project(project)
    print("\nWhat each paimon_upsert run did:")
    for m in messages:
        print(f"  batch {m['batch']}  {m['model']:<22} {m['message']}")
    show(warehouse, schema)
    print(f"\nDone in {time.time() - started:.0f}s. The tables stay in {warehouse} "
          f"(Spark's catalog of them in {os.path.join(warehouse, '.spark')}).")


if __name__ == "__main__":
    main()
