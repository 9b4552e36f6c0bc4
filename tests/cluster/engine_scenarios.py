"""The engine's jobs on a standalone cluster, run as a child process of test_cluster_engine.py.

    python tests/cluster/engine_scenarios.py CONFIG.json REPORT.json   (from any directory)

PySpark allows one SparkContext per process and the test process has its own local one, so this
process holds the cluster application. Executors run PYSPARK_PYTHON (set by the test to a Python
without dbt_paimon). Everything that happens is written to the report, errors included, for the
test to assert on; the tables are left in the warehouse for it to read.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback


def _wait_for_executors(sc, count: int, timeout: float = 120.0) -> float:
    """Seconds until `count` executors registered (the driver is one more entry in the status)."""
    started = time.time()
    while sc._jsc.sc().getExecutorMemoryStatus().size() < count + 1:
        if time.time() - started > timeout:
            raise RuntimeError(f"{count} executors did not register within {timeout}s")
        time.sleep(0.2)
    return time.time() - started


def _probe_without_ship(index, _rows):
    """Before anything is shipped: can an executor's Python import dbt_paimon by itself?"""
    import os
    import sys

    try:
        import dbt_paimon
        outcome = f"imported from {dbt_paimon.__file__}"
    except ImportError as e:
        outcome = f"{type(e).__name__}: {e}"
    yield {"cwd": os.getcwd(), "executable": sys.executable, "path": sys.path, "outcome": outcome}


def _files(path: str) -> list[str]:
    from dbt_paimon.store.common.fileio import FileIO
    return sorted((st.path, st.size) for st in FileIO.get(path).list_status(path, recursive=True))


def _refused(report: dict, name: str, call, table_path: str) -> None:
    """Run a job that must be refused before it writes: its error, and the table before/after."""
    from dbt_paimon.store import FileStoreTable

    before = (FileStoreTable.open(table_path).latest_snapshot().id, _files(table_path))
    entry = {"error": None, "type": None}
    started = time.time()
    try:
        call()
    except Exception as e:  # noqa: BLE001 - recorded for the test
        entry.update(error=str(e), type=type(e).__name__, module=type(e).__module__)
    entry["seconds"] = round(time.time() - started, 2)
    after = (FileStoreTable.open(table_path).latest_snapshot().id, _files(table_path))
    entry.update(snapshot_before=before[0], snapshot_after=after[0], files_unchanged=before[1] == after[1])
    report["refusals"][name] = entry


SQL_STATEMENTS = (  # (table, statement)
    ("cross", "INSERT INTO db.cross VALUES (1, 'b', 11), (4, 'a', 40)"),
    ("cross", "UPDATE db.cross SET v = v + 100 WHERE dt = 'a'"),
    ("cross", "MERGE INTO db.cross t USING (SELECT * FROM VALUES (3, 'b', 33), (5, 'b', 50), (2, 'a', 0) "
              "AS s(id, dt, v)) s "
              "ON t.id = s.id WHEN MATCHED AND s.v = 0 THEN DELETE WHEN MATCHED THEN UPDATE SET * "
              "WHEN NOT MATCHED THEN INSERT *"),
    ("cross", "DELETE FROM db.cross WHERE v > 130"),
    ("logs", "INSERT INTO db.logs VALUES (4, 'b', 40)"),
    ("logs", "UPDATE db.logs SET v = -v WHERE id = 2"),
    ("logs", "DELETE FROM db.logs WHERE dt = 'b'"),
)


def _spark_sql(spark, config: dict, report: dict) -> None:
    """A cross-partition key table and an append table beside the engine's table, the statements
    above on them; after each, the table's rows as Spark SQL reads them and its latest snapshot."""
    from dbt_paimon.engine import RunSettings, upsert, write
    from dbt_paimon.sql import register
    from dbt_paimon.store import FileStoreTable

    warehouse = config["table"].rsplit("/db.db/", 1)[0]
    rows = spark.createDataFrame([(1, "a", 10), (2, "a", 20), (3, "b", 30)], "id BIGINT, dt STRING, v BIGINT")
    upsert(rows, f"{warehouse}/db.db/cross", primary_keys="id", partition_keys="dt")
    write(rows, f"{warehouse}/db.db/logs", partition_keys="dt")
    register(spark, RunSettings(storage_options=config["storage"]), warehouse=warehouse)
    spark.sparkContext.setJobGroup("sql", "Spark SQL on Paimon tables")
    report["sql"], seen = [], {"cross": 1, "logs": 1}
    try:
        for name, statement in SQL_STATEMENTS:
            spark.sql(statement)
            got = spark.sql(f"SELECT id, dt, v FROM db.{name}").collect()
            table = FileStoreTable.open(f"{warehouse}/db.db/{name}")
            latest = table.latest_snapshot().id
            kinds = [table.snapshots.snapshot(i).commit_kind for i in range(seen[name] + 1, latest + 1)]
            seen[name] = latest
            report["sql"].append({"statement": statement, "rows": sorted(list(r) for r in got), "commits": kinds})
    finally:
        for key in ("spark.jobGroup.id", "spark.job.description"):
            spark.sparkContext.setLocalProperty(key, None)


def _native_read(spark, config: dict) -> dict:
    """Two upserts of the same keys into fixed buckets (so every bucket holds two versions of keys
    its merge must choose from), then read: its rows, whether Spark read it with the bitmap of the
    rows the merge drops, under the job group "native-read"."""
    from dbt_paimon.engine import read
    from dbt_paimon.engine import upsert
    from tests.engine.helpers import frame
    from tests.engine.model import random_batches

    path = config["scratch"] + "/local-wh/db.db/t"
    for rows in random_batches(config["seed"], 2, config["size"], config["key_space"]):
        upsert(frame(spark, rows), path, primary_keys="id", options={"bucket": "2"})
    spark.sparkContext.setJobGroup("native-read", "a local table read by Spark's Parquet reader")
    try:
        df = read(spark, path)
        got = [r.asDict() for r in df.select("id", "dt", "v").collect()]
        plan = df.groupBy().count()._jdf.queryExecution().executedPlan().toString()
        return {"path": path, "rows": sorted(got, key=lambda r: r["id"]), "bitmap": "LocalTableScan [bits" in plan,
                "python": "(Python)" in plan}
    finally:
        for key in ("spark.jobGroup.id", "spark.job.description"):
            spark.sparkContext.setLocalProperty(key, None)


def main(config_path: str, out_path: str) -> None:
    with open(config_path) as f:
        config = json.load(f)
    report: dict = {"seconds": {}, "upserts": [], "refusals": {}}
    started = time.time()
    from pyspark.sql import SparkSession

    from dbt_paimon.store.common import fileio
    fileio.configure(config.get("storage"))  # the warehouse is on the test session's S3 server

    from dbt_paimon.engine import compact
    from dbt_paimon.engine import delete, upsert
    from dbt_paimon.engine.runtime import deploy
    from dbt_paimon.sql import register
    from tests.engine.helpers import frame
    from tests.engine.model import random_batches

    spark = (SparkSession.builder.master(config["master"]).appName("dbt-paimon-cluster-engine")
             .config("spark.executor.memory", "512m").config("spark.executor.cores", "1")
             .config("spark.cores.max", "2")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.warehouse.dir", config["scratch"] + "/spark-warehouse")
             .config("spark.eventLog.enabled", "true").config("spark.eventLog.compress", "false")
             .config("spark.eventLog.dir", "file:" + config["events"])
             .getOrCreate())
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")
    report["app_id"] = sc.applicationId
    report["python_exec"] = sc.pythonExec
    report["seconds"]["session"] = round(time.time() - started, 2)
    report["seconds"]["executors"] = round(_wait_for_executors(sc, 2), 2)
    try:
        # 1. the executors' Python cannot import dbt_paimon on its own
        n = sc.defaultParallelism
        report["without_ship"] = sc.parallelize(range(n), n).mapPartitionsWithIndex(_probe_without_ship).collect()

        # 2. prepare: ship + check, cold then warm
        for label in ("prepare_cold", "prepare_warm"):
            t0 = time.time()
            report[label] = deploy.prepare(spark, config["table"])
            report["seconds"][label] = round(time.time() - t0, 2)

        # 3. distributed upserts (auto on a cluster master), keys moving partitions
        batches = random_batches(config["seed"], config["batches"], config["size"], config["key_space"])
        for rows in batches:
            t0 = time.time()
            result = upsert(frame(spark, rows), config["table"], primary_keys="id", partition_keys="dt",
                            options={"bucket": "-1", "dynamic-bucket.target-row-num": "100"})
            report["upserts"].append({"execution": result.execution, "snapshot_id": result.snapshot_id,
                                      "inserted": result.inserted, "updated": result.updated,
                                      "moved": result.moved, "skipped": result.skipped,
                                      "extra_snapshots": result.extra_snapshots,
                                      "bootstrap": result.bootstrap.get("source"),
                                      "built_by": result.bootstrap.get("by"),
                                      "seconds": round(time.time() - t0, 2)})

        # 3b. the key index, built by the second upsert's Spark job on the executors (on S3): the
        # Spark job's lookup tasks read it and its writer tasks record their rows in it
        from dbt_paimon.key_index import KeyIndex
        from dbt_paimon.store.table import FileStoreTable
        for rows in random_batches(config["seed"] + 2, config["index_batches"], config["size"], config["key_space"]):
            result = upsert(frame(spark, rows), config["table"], primary_keys="id", partition_keys="dt")
            report["upserts"].append({"execution": result.execution, "snapshot_id": result.snapshot_id,
                                      "inserted": result.inserted, "updated": result.updated,
                                      "moved": result.moved, "skipped": result.skipped,
                                      "bootstrap": result.bootstrap.get("source")})
        table = FileStoreTable.open(config["table"])
        state = KeyIndex(table.io, table.path, table.schema).refresh(table.plan())
        report["index_after"] = {k: state.stats.get(k) for k in ("built", "buckets_read_again", "buckets_added_to")}

        # the `paimon` source reads on the executors too (registered after the engine was shipped:
        # a Python data source carries the files shipped before its registration)
        register(spark)
        report["read_rows"] = spark.read.format("paimon").load(config["table"]).count()

        # 3c. a table on the machine's own disk (which the executors share) read by Spark's Parquet
        # reader on the executors (engine/read/), its buckets' newer versions left for the merge
        report["native_read"] = _native_read(spark, config)

        # 4a. Spark SQL on Paimon tables of the warehouse (sql/): each statement's job runs on
        # the executors (its Spark jobs in the job group "sql", which the test finds in the event log)
        _spark_sql(spark, config, report)

        # 4. delete, then 5. compaction, both Spark jobs on the executors
        t0 = time.time()
        deleted = delete(spark, config["table"], config["delete_where"])
        report["delete"] = {"deleted": deleted.deleted, "snapshot_id": deleted.snapshot_id,
                            "seconds": round(time.time() - t0, 2)}
        t0 = time.time()
        report["compact"] = {"snapshot_id": compact(spark, config["table"]), "seconds": round(time.time() - t0, 2)}

        # 6. executors whose Python lacks a module, or runs another Python: refused before writing.
        # sc.pythonExec is what every Python function created from now on names as its interpreter,
        # so the same executors start workers of another Python (one SparkContext per process).
        more = frame(spark, random_batches(config["seed"] + 1, 1, config["size"], config["key_space"])[0])
        for name, python in (("no_fastavro", config["python_no_fastavro"]),
                             ("other_minor", config["python_other_minor"])):
            if python is None:
                continue
            sc.pythonExec = python
            try:
                _refused(report, f"upsert_{name}", lambda: upsert(more, config["table"], primary_keys="id",
                                                                  partition_keys="dt"), config["table"])
                if name == "no_fastavro":
                    _refused(report, "delete_no_fastavro", lambda: delete(spark, config["table"], "true"),
                             config["table"])
            finally:
                sc.pythonExec = config["python"]
    except Exception:  # noqa: BLE001 - the test shows it
        report["failure"] = traceback.format_exc()
    finally:
        report["seconds"]["total"] = round(time.time() - started, 2)
        with open(out_path, "w") as f:
            json.dump(report, f, indent=1, default=str)
        spark.stop()


if __name__ == "__main__":
    # the repository on this process's path only (tests.*, and dbt_paimon as the driver imports
    # it); never on PYTHONPATH, which Spark would hand to the Python workers it starts
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    main(sys.argv[1], sys.argv[2])
