"""dbt-paimon's Spark engine: `dbt_paimon.engine.upsert` into a cross-partition table.

Table: primary key (id) only, partitioned by dt, bucket -1, so Paimon's KEY_DYNAMIC mode: a key
whose dt changes is deleted from its old partition and written into the new one.
The SparkSession (local[2], one JVM) is started before the clock runs, like the session a dbt run
already has; its start-up is reported apart. The batch is cached in Spark before timing so that the
upsert is measured from in-memory rows, as for the Python peers that get an Arrow table.
Read-back uses the project's own store reader (dbt_paimon.store), not Spark.
"""

from __future__ import annotations

import json
import os
import sys
import time

from peers.base import Peer as Base
from peers.store_reader import read_parts

TABLE_OPTIONS = {"bucket": "-1"}
SETUP_PART_ROWS = 10_000_000   # W3-100M's base goes in 10 upserts (each assign task ~4 GB at peak)


def tuning() -> dict:
    """The Spark settings every Spark-based system of the bench runs with (the dbt run's profile too),
    run.py's --spark-conf applied last."""
    conf = {
        "spark.driver.memory": os.environ.get("BENCH_SPARK_DRIVER_MEMORY", "6g"),
        "spark.sql.shuffle.partitions": "4",       # 2 cores: Spark's default of 200 is all overhead
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    conf.update(json.loads(os.environ.get("BENCH_SPARK_CONF", "{}")))   # run.py --spark-conf k=v
    return conf


def event_log(event_dir: str) -> dict:
    """Spark's event log gives the per-stage profile (where the time goes) for free."""
    os.makedirs(event_dir, exist_ok=True)
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": "file://" + os.path.abspath(event_dir),
            "spark.eventLog.compress": "false"}


def spark_session(event_dir: str | None = None):
    from pyspark.sql import SparkSession

    conf = {"spark.master": "local[2]", "spark.sql.session.timeZone": "UTC", "spark.ui.enabled": "false"}
    conf.update(tuning())
    if event_dir:
        conf.update(event_log(event_dir))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)             # workers use the bench venv
    # as the adapter's session has it (local_session.py): workers forked with the engine imported,
    # task results handed over directly
    from dbt_paimon.engine.runtime import local_session
    conf = {**local_session.session_settings(conf["spark.master"], os.environ["PYSPARK_PYTHON"]), **conf}
    b = SparkSession.builder.appName("dbt-paimon-bench")
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.range(1).count()   # first job: JIT and executor start belong to start-up, not to the upsert
    # What the adapter does when a dbt command's session starts (engine/warm_up.py, in the background
    # while dbt parses): Python worker daemons up, one Arrow conversion done. Waited for here, so
    # that it is start-up, as in a dbt run; the first upsert without it is in the git history of BENCHMARKS.md.
    if os.environ.get("BENCH_WARM_UP", "1") != "0":
        from dbt_paimon.engine import warm_up
        for thread in warm_up.start(spark):
            thread.join()
    return spark


class Peer(Base):
    label = "dbt-paimon engine"
    note = ("Spark local[2], cross-partition (bucket -1, PK id, partitioned by dt); execution auto "
            "(driver-local when the batch and the key index fit in the driver)")
    execution = "auto"
    key_index = True
    table_options = TABLE_OPTIONS
    second_reader = "pypaimon-rust reader"

    def available(self):
        try:
            from dbt_paimon.engine import upsert  # noqa: F401
        except ImportError as e:
            return f"dbt_paimon.engine.upsert not importable ({e})"
        return None

    def versions(self):
        import pyspark
        return {"pyspark": pyspark.__version__}

    def start(self, work_dir):
        self.events = os.path.join(work_dir, "spark-events")
        self.window = (float("inf"), float("inf"))
        self.spark = spark_session(self.events)
        import dbt_paimon.engine  # noqa: F401 - the pipeline, before the clock, as a dbt process has it (and every peer its library)

    def stop(self):
        self.spark.stop()   # also flushes the event log that profile() reads

    def _table(self, work_dir):
        return os.path.join(work_dir, "warehouse", "bench.db", "t")

    def _upsert(self, df, work_dir, **settings):
        from dbt_paimon.engine import upsert
        from dbt_paimon.engine.settings import RunSettings
        settings = RunSettings(execution=self.execution, key_index=self.key_index, **settings)
        self.last = upsert(df, self._table(work_dir), primary_keys=["id"], partition_keys=["dt"],
                           options=dict(self.table_options), settings=settings)
        return self.last

    def setup(self, work_dir, base_path):
        """The base table by upserts of at most SETUP_PART_ROWS rows, each through the cores'
        number of assigners: the bucket layout a table gets from batches of the size a 2-core
        machine takes, whatever the base's size (the first write creates the table)."""
        import pyarrow.parquet as pq
        from pyspark.sql import functions as F
        base = self.spark.read.parquet(base_path)
        parts = -(-pq.ParquetFile(base_path).metadata.num_rows // SETUP_PART_ROWS)
        for i in range(parts):   # the base's ids are 0..n-1: id % parts cuts it into equal parts
            self._upsert(base if parts == 1 else base.where(F.col("id") % parts == i), work_dir,
                         assigner_parallelism=self.spark.sparkContext.defaultParallelism)
            if i == 0 and self.key_index:
                # The key index as an earlier driver-local upsert leaves it (a base written by the
                # Spark job has none yet: the first local upsert builds it, once; its cost is
                # setup_seconds'). The later parts' Spark jobs bootstrap from it and record in it.
                from dbt_paimon.key_index import KeyIndex
                from dbt_paimon.store.table import FileStoreTable
                table = FileStoreTable.open(self._table(work_dir))
                KeyIndex(table.io, table.path, table.schema).refresh(table.plan())

    def load_batch(self, batch_path):
        df = self.spark.read.parquet(batch_path).cache()
        df.count()
        return df

    def upsert(self, work_dir, batch):
        self.window = (time.time() * 1000, float("inf"))
        facts = _facts(self._upsert(batch, work_dir))
        self.window = (self.window[0], time.time() * 1000)
        return facts

    def profile(self):
        """The Spark stages the timed upsert ran, longest first (name, seconds, tasks), and the time in
        which no stage ran: driver-side planning, bootstrap listing, commit, Python start-up."""
        stages, spans = [], []
        files = [os.path.join(d, n) for d, _, names in os.walk(self.events) for n in names
                 if not n.startswith(".")]   # Spark 4: eventlog_v2_<app>/events_<n>_<app>[.inprogress]
        for path in files:
            with open(path) as f:
                for line in f:
                    e = json.loads(line)
                    if e.get("Event") != "SparkListenerStageCompleted":
                        continue
                    info = e["Stage Info"]
                    start, end = info.get("Submission Time"), info.get("Completion Time")
                    if start and end and self.window[0] <= start <= self.window[1]:
                        stages.append({"stage": info["Stage ID"], "name": info["Stage Name"],
                                       "seconds": (end - start) / 1000, "tasks": info["Number of Tasks"]})
                        spans.append((start, end))
        busy, reach = 0.0, float("-inf")   # union of the stage intervals
        for a, b in sorted(spans):
            busy += max(0.0, b - max(a, reach))
            reach = max(reach, b)
        return {"stages": sorted(stages, key=lambda s: -s["seconds"]),
                "no_stage_running_seconds": round((self.window[1] - self.window[0] - busy) / 1000, 3)}

    def check(self, info, case):
        """The engine's own counts must match the batch's mix (only the unambiguous ones)."""
        want = {"inserted": case["new_keys"], "moved": case["moves"]}
        bad = {k: (info[k], v) for k, v in want.items() if k in info and info[k] != v}
        return f"engine counts (got, expected): {bad}" if bad else None

    def read_back(self, work_dir):
        return read_parts(self._table(work_dir))

    def second_opinion(self, work_dir):
        """Apache Paimon's Rust reader on our table: right for us is not enough, right for Paimon is."""
        from peers import pypaimon_rust_native
        return pypaimon_rust_native.Peer().read_back(work_dir)


def _facts(result) -> dict:
    """The engine's result as JSON-able facts (snapshot id, counts), whatever its exact class."""
    fields = getattr(result, "__dict__", None) or {
        k: getattr(result, k) for k in dir(result) if not k.startswith("_") and not callable(getattr(result, k))}
    return {k: v if isinstance(v, (int, float, str, bool, type(None), dict)) else str(v) for k, v in fields.items()}
