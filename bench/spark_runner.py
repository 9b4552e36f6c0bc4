"""One SparkSession in a side venv (spark_side.py starts it): requests in, answers out, JSON lines.

    python spark_runner.py JARS CONF_JSON

JARS comma-separated (spark.jars), CONF_JSON the session's settings (the formats' extensions and
catalogs, the bench's tuning). Requests (one JSON line each; the answer one line, or {"error": ...}):

  {"op": "ping"}                                   the session is up
  {"op": "sql", "sql": S, "parquet": DIR?, "views": {NAME: PATH}?}
        rows and seconds; `views` first plans each dbt-paimon table at PATH as a fresh DataFrame
        (`dbt_paimon.engine.read`, inside the clock: what `spark.sql` does for a query on a catalog
        table, dbt's every `ref()`) and names it NAME for this statement
  {"op": "upsert", "path": P, "parquet": F, "options": {...}}    dbt_paimon.engine.upsert of F's rows
  {"op": "compact", "path": P}                     dbt_paimon.engine.compact
  {"op": "rss", "reset": bool}                     this process tree's peak RSS, the Python driver's own
                                                     and the JVM's peak heap use (MB); reset: start anew

Values come back as JSON numbers, strings, booleans or null (Decimal as text, timestamps ISO-8601).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
from decimal import Decimal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # worker.py's memory readers


def _json(value):
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value


def session(jars: str, conf: dict):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("bench-side")
    for key, value in {"spark.jars": jars, "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                       "spark.sql.session.timeZone": "UTC", **conf}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class Runner:
    def __init__(self, spark):
        self.spark, self.registered = spark, False

    def _paimon(self):
        """dbt-paimon's `paimon` source (the part of a read that needs a merge in Python), registered
        as the adapter's session has it (once)."""
        if not self.registered:
            from dbt_paimon.sql import register
            register(self.spark)
            self.registered = True

    def ping(self, req):
        return {"spark": self.spark.version}

    def sql(self, req):
        start = time.perf_counter()
        for name, path in (req.get("views") or {}).items():
            self._paimon()
            from dbt_paimon.engine import read
            read(self.spark, path).createOrReplaceTempView(name)
        frame = self.spark.sql(req["sql"])
        if req.get("parquet"):
            frame.write.mode("overwrite").parquet(req["parquet"])
            rows = []
        else:
            rows = [[_json(v) for v in row] for row in frame.collect()]
        return {"columns": frame.columns, "rows": rows, "seconds": time.perf_counter() - start}

    def upsert(self, req):
        from dbt_paimon.engine import upsert
        start = time.perf_counter()
        result = upsert(self.spark.read.parquet(req["parquet"]), req["path"], primary_keys=["id"],
                        partition_keys=["dt"], options=req.get("options") or {})
        return {"summary": result.summary(), "seconds": time.perf_counter() - start}

    def compact(self, req):
        from dbt_paimon.engine import compact
        start = time.perf_counter()
        compact(self.spark, req["path"])
        return {"seconds": time.perf_counter() - start}

    def rss(self, req):
        """Peak RSS of this process, its JVM and Python workers (worker.py's sum of VmHWM), and apart:
        the Python driver's own (this process: what a read plans or collects in Python) and the
        JVM's heap, the sum of its heap pools' peak use (local mode: driver and executor in one);
        `reset` clears the high-water marks first (Linux: clear_refs 5; the pools' peaks), so the
        next answer is the peak of what ran in between."""
        from worker import descendants, hwm_kib, peak_rss_mb
        pools = [p for p in self.spark._jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
                 if p.getType().name() == "HEAP"]
        if req.get("reset"):
            for pid in [os.getpid()] + descendants(os.getpid()):
                try:
                    with open(f"/proc/{pid}/clear_refs", "w") as f:
                        f.write("5")
                except OSError:
                    pass
            for pool in pools:
                pool.resetPeakUsage()
        return {"peak_rss_mb": peak_rss_mb(), "driver_python_mb": hwm_kib(os.getpid()) / 1024,
                "jvm_heap_peak_mb": sum(p.getPeakUsage().getUsed() for p in pools) / (1 << 20)}


def main() -> None:
    runner = Runner(session(sys.argv[1], json.loads(sys.argv[2])))
    out = sys.stdout
    sys.stdout = sys.stderr   # nothing but answers on the pipe
    for line in sys.stdin:
        req = json.loads(line)
        try:
            answer = getattr(runner, req["op"])(req)
        except Exception as e:  # noqa: BLE001 - the caller reports Spark's message
            answer = {"error": f"{type(e).__name__}: {str(e)[:3000]}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()
    runner.spark.stop()


if __name__ == "__main__":
    main()
