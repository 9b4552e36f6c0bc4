"""The dbt-level workload (issue 57 item 2, issue 58 item 3): one dbt project built with `dbt build` on
dbt-paimon, on dbt-spark with `file_format: delta` and with `file_format: iceberg`, on one Spark (4.1,
the side venv of spark_side.py, where Delta 4.2 and Iceberg 1.11 run; dbt-paimon is installed there
too).

The project (written per system into its work dir; the same model text for all):
- `orders`: `incremental`, `incremental_strategy='merge'`, `unique_key='id'`, `partition_by=['dt']`,
  selecting every row of a Parquet input (bench/data.py's workload: W2 is a 10M-row base in 100
  partitions and a 1M batch whose updates half move their key to another partition);
- three downstream `table` models: `orders_by_dt` (group by the partition), `active_orders` (a
  filter and a projection, about half the rows), `orders_by_name` (group by a value column);
- tests: `unique` and `not_null` on `orders.id`, `not_null` on `orders_by_dt.dt`.

A round, per system in turn, in a fresh process and work dir (dbt_build_child.py): `dbt run
--full-refresh` on the base (set-up, not timed), then the timed `dbt build` on the batch in the same
process (its Spark warm, as a second invocation of a long-lived dbt process), then `dbt show`
queries whose answers are checked against model.py's `cross` table: a wrong answer marks the
system INVALID. A figure is the median round: the build's wall time, its models' and tests' own
times (dbt's `execution_time`), and the incremental model's, the `group by dt` model's and the tests'.
Profiles: `threads: 2` (these 2 cores), local[2], the bench's Spark settings (peers' `tuning`).

    python bench/dbt_build_bench.py [--workload W2] [--scale 1.0] [--rounds 1] [--systems a,b]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import pyarrow.compute as pc
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT]

import data  # noqa: E402
import model  # noqa: E402
import spark_side  # noqa: E402
from formats import DELTA_CONF  # noqa: E402
from peers.dbt_paimon_engine import tuning  # noqa: E402
from run import machine, prepare_case, save_results  # noqa: E402

WORK = os.path.join(HERE, ".work", "dbt-build")
CHILD = os.path.join(HERE, "dbt_build_child.py")
SYSTEMS = ["dbt-paimon", "dbt-spark-delta", "dbt-spark-iceberg"]
THREADS = 2

MODELS = {
    "orders": """{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id',
           partition_by=['dt']) }}
select * from parquet.`{{ var('input') }}`
""",
    "orders_by_dt": """{{ config(materialized='table') }}
select dt, count(*) as n, sum(qty) as qty from {{ ref('orders') }} group by dt
""",
    "active_orders": """{{ config(materialized='table') }}
select id, dt, price, updated_at from {{ ref('orders') }} where active
""",
    "orders_by_name": """{{ config(materialized='table') }}
select name, count(*) as n, avg(price) as avg_price from {{ ref('orders') }} group by name
""",
}
SCHEMA_YML = """version: 2
models:
  - name: orders
    columns:
      - name: id
        data_tests: [unique, not_null]
  - name: orders_by_dt
    columns:
      - name: dt
        data_tests: [not_null]
"""


def profile(system: str, work: str, jars: list[str]) -> dict:
    conf = dict(tuning())
    if system == "dbt-paimon":
        return {"type": "paimon", "schema": "bench", "threads": THREADS, "master": "local[2]",
                "warehouse": os.path.join(work, "warehouse"), "spark_dir": os.path.join(work, "spark"),
                "server_side_parameters": conf}
    conf.update({"spark.master": "local[2]", "spark.jars": ",".join(jars),
                 "spark.sql.warehouse.dir": os.path.join(work, "warehouse")})
    if system == "dbt-spark-delta":
        conf.update(DELTA_CONF)
    else:
        # Iceberg's session catalog over the Hive metastore dbt-spark's session starts (embedded
        # Derby): dbt lists the schema's tables through Spark's catalog, so Iceberg's tables must
        # be in it (with a Hadoop catalog they were not, and the incremental model was rebuilt)
        conf.update({"spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
                     "spark.sql.catalog.spark_catalog": "org.apache.iceberg.spark.SparkSessionCatalog",
                     "spark.sql.catalog.spark_catalog.type": "hive",
                     # Hive's transaction handler pools with BoneCP by default, which Spark does not ship
                     "spark.hadoop.datanucleus.connectionPoolingType": "HikariCP",
                     # and its lock tables are missing from the embedded metastore: Iceberg commits
                     # with the metastore's check of the table's metadata location instead
                     "spark.hadoop.iceberg.engine.hive.lock-enabled": "false"})
    return {"type": "spark", "method": "session", "host": "NA", "schema": "bench", "threads": THREADS,
            "server_side_parameters": conf}


def write_project(system: str, work: str, jars: list[str], case_dir: str) -> str:
    project = os.path.join(work, "project")
    os.makedirs(os.path.join(project, "models"))
    models: dict = {}
    if system != "dbt-paimon":
        models = {"bench": {"+file_format": system.rsplit("-", 1)[1]}}
    files = {
        "profiles.yml": json.dumps({"bench": {"target": "t", "outputs": {"t": profile(system, work, jars)}}}),
        "dbt_project.yml": json.dumps({"name": "bench", "version": "1.0", "profile": "bench",
                                       "config-version": 2, "models": models}),
        "models/schema.yml": SCHEMA_YML,
        "steps.json": json.dumps([
            ["setup", ["run", "--full-refresh", "--vars", json.dumps({"input": f"{case_dir}/base.parquet"})]],
            ["build", ["build", "--vars", json.dumps({"input": f"{case_dir}/batch.parquet"})]]]),
        **{f"models/{name}.sql": text for name, text in MODELS.items()},
    }
    for name, text in files.items():
        with open(os.path.join(project, name), "w") as f:
            f.write(text)
    return project


def expected_checks(case_dir: str) -> dict:
    """What every system's `dbt show` queries must answer (dbt_build_child.CHECKS), from the model."""
    t = model.expected(pq.read_table(f"{case_dir}/base.parquet"), pq.read_table(f"{case_dir}/batch.parquet"), "cross")
    by_dt = t.group_by("dt").aggregate([("id", "count"), ("qty", "sum")]).sort_by("dt")
    names = t.group_by("name").aggregate([("id", "count")])
    return {"orders": [[str(t.num_rows), str(t.num_rows), str(pc.sum(t["qty"]).as_py())]],
            "by_dt": [[d, str(n), str(q)] for d, n, q in zip(by_dt["dt"].to_pylist(), by_dt["id_count"].to_pylist(),
                                                             by_dt["qty_sum"].to_pylist())],
            "active": [[str(pc.sum(pc.cast(t["active"], "int64")).as_py())]],
            "names": [[str(names.num_rows), str(t.num_rows)]]}


def one_round(system: str, python: str, jars: list[str], case_dir: str, want: dict, log_dir: str) -> dict:
    work = os.path.join(WORK, system)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    project = write_project(system, work, jars, case_dir)
    out = os.path.join(work, "report.json")
    env = dict(os.environ, PYSPARK_PYTHON=python, PYTHONHASHSEED="0")
    started = time.perf_counter()
    with open(os.path.join(log_dir, f"{system}.log"), "a") as log:
        done = subprocess.run([python, CHILD, project, out], cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        return {"system": system, "status": f"failed (exit {done.returncode}; see {system}.log)"}
    with open(out) as f:
        report = json.load(f)
    build = next(s for s in report["steps"] if s["name"] == "build")
    setup = next(s for s in report["steps"] if s["name"] == "setup")

    def own(kind: str, name: str | None = None) -> float:
        return round(sum(n["seconds"] for n in build["nodes"] if n["type"] == kind and name in (None, n["name"])), 3)

    wrong = [k for k, rows in want.items() if report["checks"].get(k) != rows]
    return {"system": system, "status": "ok" if not wrong else f"INVALID: {wrong}",
            "build": build["seconds"], "models": own("model"), "tests": own("test"),
            "orders": own("model", "orders"), "orders_by_dt": own("model", "orders_by_dt"),
            "setup": setup["seconds"], "process": round(time.perf_counter() - started, 1),
            "nodes": {n["name"]: round(n["seconds"], 3) for n in build["nodes"]},
            "checks": report["checks"] if wrong else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="W2", choices=["W1", "W2"])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    args = ap.parse_args()
    systems = [s for s in SYSTEMS if s in args.systems.split(",")]
    [case] = data.cases(args.workload, args.scale)
    case_dir = prepare_case(case)
    python, jars = spark_side.ensure(spark_side.LINES["4.1"])
    want = expected_checks(case_dir)
    started, mach = dt.datetime.now(), machine()
    log_dir = os.path.join(WORK, "logs-" + started.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(log_dir)
    print(f"{case.name}: base {case.base_rows:,} rows, batch {case.batch_rows:,}; load {mach['load_average_at_start']}")
    rounds: dict = {s: [] for s in systems}
    for r in range(args.rounds):
        for system in (systems if r % 2 == 0 else systems[::-1]):
            res = one_round(system, python, jars, case_dir, want, log_dir)
            rounds[system].append(res)
            print(f"round {r + 1} {system}: {res['status']}"
                  + (f", build {res['build']:.1f} s (models {res['models']:.1f}, tests {res['tests']:.1f}, "
                     f"orders {res['orders']:.1f}, orders_by_dt {res['orders_by_dt']:.1f}); set-up {res['setup']:.1f} s"
                     if "build" in res else ""), flush=True)
    results = []
    for system, runs in rounds.items():
        ok = [x for x in runs if x["status"] == "ok"]
        row = {"system": system, "rounds": runs, "status": "ok" if len(ok) == len(runs) else "not all ok"}
        for k in ("build", "models", "tests", "orders", "orders_by_dt", "setup"):
            if ok:
                row[k] = statistics.median(x[k] for x in ok)
        results.append(row)
    ours = next((x for x in results if x["system"] == "dbt-paimon" and "build" in x), None)
    for row in results:
        if ours and row is not ours and "build" in row:
            row["ours_over_this"] = {k: round(ours[k] / row[k], 3) for k in ("build", "models", "tests", "orders",
                                                                              "orders_by_dt") if row[k]}
        print(f"{row['system']}: {row['status']}; " + ", ".join(f"{k} {row[k]:.2f} s" for k in
                                                              ("build", "models", "tests", "orders", "orders_by_dt")
                                                              if k in row)
              + (f"; dbt-paimon / this {row['ours_over_this']}" if "ours_over_this" in row else ""))
    stem = f"dbt-build-{started.date().isoformat()}" + ("" if args.scale == 1 else f"-s{args.scale:g}")
    doc = {"date": started.isoformat(timespec="seconds"), "machine": mach, "case": case.to_json(),
           "rounds": args.rounds, "threads": THREADS, "pyspark": spark_side.LINES["4.1"].pyspark,
           "jars": {a.coordinates: a.sha256 for a in spark_side.LINES["4.1"].jars}, "results": results}
    out = save_results(stem, doc)
    print(f"results: {os.path.relpath(out, ROOT)}")


if __name__ == "__main__":
    main()
