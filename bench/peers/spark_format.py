"""A table format's own Spark writer as a peer (formats.py): Delta, Iceberg, Paimon 2.0's connector.

Each runs in a side Spark (spark_side.py: the pyspark its connector is built for, in a venv of its
own, one long-lived process), local[2] with the bench's Spark settings, like paimon_spark_sql.py.
Its session is warm before the clock, as a dbt run's would be: started, then the same write (create,
load, the batch applied with a key moving partition) into a small table of its own. The batch is
cached in Spark before timing (`CACHE TABLE`), as dbt-paimon's is. The timed upsert is one statement
(formats.py: dbt-spark's MERGE, or Paimon's INSERT INTO). Read-back: the format's own Spark read,
written to Parquet by that Spark, checked against the `cross` model.
"""

from __future__ import annotations

import glob
import os
import sys

import pyarrow.parquet as pq

from peers.base import Peer as Base

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)

TAG = "t"   # the measured table's name within the work dir (formats.py names it from this)


class SparkFormatPeer(Base):
    format_name = "?"

    def __init__(self):
        from formats import FORMATS
        self.fmt = FORMATS[self.format_name]
        self.label = self.fmt.label
        self.copyable = self.fmt.copyable
        self.note = (f"{self.fmt.label}: Spark {self.fmt.line} local[2], partitioned by dt, keyed by id "
                     f"({self.fmt.props or 'default settings'}); warm session, batch cached")

    def available(self):
        try:
            import spark_side
            spark_side.ensure(spark_side.LINES[self.fmt.line])
        except Exception as e:  # noqa: BLE001 - any failure to set up: the peer is reported unavailable with it
            return f"Spark {self.fmt.line} side venv or jars cannot be set up here ({str(e)[:300]})"
        return None

    def versions(self):
        import spark_side
        return {**self.fmt.versions, f"pyspark (side, {self.fmt.name})": spark_side.LINES[self.fmt.line].pyspark}

    def start(self, work_dir):
        import spark_side
        from peers.dbt_paimon_engine import tuning
        self.root = os.path.abspath(work_dir)
        self.spark = spark_side.SideSpark(spark_side.LINES[self.fmt.line], {**tuning(), **self.fmt.conf(self.root)},
                                          os.path.join(work_dir, f"{self.fmt.name}.log"))
        # warm: the same kind of write into a table of its own (JIT, the connector's classes, its MERGE);
        # named by process, as the set-up phase's warm table comes along in the copied work dir
        warm = f"warm{os.getpid()}"
        self._create(warm, "(SELECT id, '2024-01-01', 'n', 1, 1.0, true, TIMESTAMP_NTZ '2024-01-01 00:00:00' "
                             "FROM range(1000)) AS w")
        self.spark.sql("CREATE OR REPLACE TEMP VIEW warm_batch AS SELECT id, '2024-01-02' AS dt, 'm' AS name, "
                       "2 AS qty, 2.0 AS price, false AS active, TIMESTAMP_NTZ '2024-01-02 00:00:00' AS updated_at "
                       "FROM range(500, 1500)")
        self.spark.sql(self.fmt.upsert(self.root, warm, "warm_batch"))

    def stop(self):
        self.spark.close()

    def _create(self, tag, source):
        for statement in self.fmt.create(self.root, tag):
            self.spark.sql(statement)
        self.spark.sql(self.fmt.load(self.root, tag, source))

    def setup(self, work_dir, base_path):
        self._create(TAG, f"parquet.`{os.path.abspath(base_path)}`")

    def load_batch(self, batch_path):
        self.spark.sql(f"CACHE TABLE batch AS SELECT * FROM parquet.`{os.path.abspath(batch_path)}`")
        return "batch"

    def upsert(self, work_dir, batch):
        answer = self.spark.sql(self.fmt.upsert(self.root, TAG, batch))
        return {"statement_seconds": answer["seconds"],
                "answer": dict(zip(answer["columns"], answer["rows"][0])) if answer["rows"] else None}

    def read_back(self, work_dir):
        out = os.path.join(work_dir, "read-back")
        self.spark.sql(f"SELECT * FROM {self.fmt.table(self.root, TAG)}", parquet=out)
        for path in sorted(glob.glob(os.path.join(out, "*.parquet"))):
            yield pq.read_table(path)
