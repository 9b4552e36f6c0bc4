"""One system's round of the dbt-level workload (dbt_build_bench.py), run in the Spark 4.1 side venv.

    python dbt_build_child.py PROJECT_DIR OUT.json

Runs, in this process (one SparkSession, started by the first dbt invocation, as dbt's `session`
method starts it): the set-up `dbt run --full-refresh` on the base, then the timed `dbt build` on
the batch, then `dbt show` queries whose answers the driver checks against its model. Writes each
step's wall seconds and every node's own (dbt's `execution_time`) to OUT.json.
"""

from __future__ import annotations

import json
import sys
import time

CHECKS = {
    "orders": "select count(*) as n, count(distinct id) as keys, sum(qty) as qty from {{ ref('orders') }}",
    "by_dt": "select dt, n, qty from {{ ref('orders_by_dt') }} order by dt",
    "active": "select count(*) as n from {{ ref('active_orders') }}",
    "names": "select count(*) as n, sum(n) as rows_counted from {{ ref('orders_by_name') }}",
}


def invoke(project: str, args: list[str]):
    from dbt.cli.main import dbtRunner

    result = dbtRunner().invoke([*args, "--project-dir", project, "--profiles-dir", project, "--quiet"])
    if not result.success:
        failed = [f"{r.node.name}: {r.message}" for r in (getattr(result.result, "results", None) or [])
                  if str(r.status) not in ("success", "pass")]
        raise SystemExit(f"dbt {' '.join(args[:1])} failed: {result.exception or failed}")
    return result.result


def main(project: str, out: str) -> None:
    with open(f"{project}/steps.json") as f:
        steps = json.load(f)
    report: dict = {"steps": [], "checks": {}}
    for name, args in steps:
        started = time.perf_counter()
        result = invoke(project, args)
        seconds = time.perf_counter() - started
        report["steps"].append({"name": name, "seconds": round(seconds, 3), "nodes": [
            {"name": r.node.name, "type": str(r.node.resource_type), "status": str(r.status),
             "seconds": round(r.execution_time, 3)} for r in result.results]})
        print(f"{name}: {seconds:.1f} s", flush=True)
    for name, sql in CHECKS.items():
        shown = invoke(project, ["show", "--inline", sql, "--limit", "1000"])
        report["checks"][name] = [[str(v) for v in row] for row in shown.results[0].agate_table.rows]
    with open(out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
