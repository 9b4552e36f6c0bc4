"""paimon-spark: Apache Paimon's own Spark connector, `INSERT INTO` the cross-partition table.

The writer a dbt-on-Spark user would otherwise pick: Spark SQL `INSERT INTO bench.t SELECT * FROM batch`
through Paimon's `SparkCatalog`, whose cross-partition writer (bucket -1, PK id, partitioned by dt)
bootstraps every key of the table, assigns buckets with its global index and moves keys across
partitions. The connector is the one the tests use (tests/java_paimon/reference.py: paimon-spark-3.5
0.9.0 on pyspark 3.5, the newest Maven Central serves here), run by tests/paimon_spark/runner.py in its
own venv and JVM, local[2] with the bench's Spark settings.

Its session is warm before the clock runs, as a dbt run's would be: started, then one cross-partition
`INSERT INTO` of another small table (JIT, the connector's classes, its bootstrap's code path). The batch
is cached in Spark before timing (`CACHE TABLE`), as dbt-paimon's is. Read-back: the connector's own
read, exported to Parquet by its Spark.
"""

from __future__ import annotations

import glob
import os
import sys

import pyarrow.parquet as pq

from peers.base import Peer as Base

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DB, TABLE = "bench", "t"
COLUMNS = ("id BIGINT NOT NULL, dt STRING, name STRING, qty INT, price DOUBLE, active BOOLEAN, "
           "updated_at TIMESTAMP_NTZ")


def _side_env():
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from tests.paimon_spark import side_env
    return side_env


class Peer(Base):
    label = "paimon-spark (Paimon SQL)"
    note = ("Paimon's Spark connector (paimon-spark-3.5 0.9.0, Spark 3.5) local[2]: INSERT INTO the cross-partition "
            "table (bucket -1, PK id, partitioned by dt), warm session, batch cached")
    second_reader = "dbt-paimon store reader"
    # Its own write of a 100M-row base is out of reach on this machine in a bench's time: its upsert
    # bootstraps from, and commits onto, a copy of dbt-paimon's table (defined alike).
    borrows_setup = {"W3-100M": "dbt-paimon"}

    def available(self):
        try:
            side_env = _side_env()
            side_env.ensure_venv()
            from tests.java_paimon.fetch_jar import fetch_jar
            fetch_jar(side_env.SPARK_CONNECTOR)
        except Exception as e:  # noqa: BLE001 - any failure to set up: the peer is reported unavailable with it
            return f"Paimon's Spark connector cannot be set up here ({e})"
        return None

    def versions(self):
        side_env = _side_env()
        return {"paimon-spark": side_env.SPARK_CONNECTOR.coordinates, "pyspark": side_env.SPARK_CONNECTOR_PYSPARK}

    def _warehouse(self, work_dir):
        return os.path.abspath(os.path.join(work_dir, "warehouse"))

    def _sql(self, work_dir, text, **kw):
        return self.client.request(self._warehouse(work_dir), text, catalog="bench_wh", **kw)

    def start(self, work_dir):
        from peers.dbt_paimon_engine import tuning
        side_env = _side_env()
        self.client = side_env.PaimonSpark(os.path.join(work_dir, "paimon-spark.log"), tuning())
        # A warm session: the same kind of write into a table of its own, a key moving partition
        warm = os.path.join(work_dir, "warm")
        os.makedirs(warm, exist_ok=True)
        self.client.request(warm, "CREATE DATABASE IF NOT EXISTS w", catalog="warm")
        self.client.request(warm, f"CREATE TABLE IF NOT EXISTS w.t ({COLUMNS}) PARTITIONED BY (dt) "
                                  "TBLPROPERTIES ('primary-key' = 'id', 'bucket' = '-1')", catalog="warm")
        for dt in ("2024-01-01", "2024-01-02"):
            self.client.request(warm, f"INSERT INTO w.t SELECT id, '{dt}', 'n', 1, 1.0, true, "
                                      "TIMESTAMP_NTZ '2024-01-01 00:00:00' FROM range(1000)", catalog="warm")

    def stop(self):
        self.client.close()

    def setup(self, work_dir, base_path):
        os.makedirs(self._warehouse(work_dir), exist_ok=True)
        self._sql(work_dir, f"CREATE DATABASE IF NOT EXISTS {DB}")
        self._sql(work_dir, f"CREATE TABLE {DB}.{TABLE} ({COLUMNS}) PARTITIONED BY (dt) "
                            "TBLPROPERTIES ('primary-key' = 'id', 'bucket' = '-1')")
        self._sql(work_dir, f"INSERT INTO {DB}.{TABLE} SELECT * FROM parquet.`{os.path.abspath(base_path)}`")

    def load_batch(self, batch_path):
        self.client.request(os.path.dirname(os.path.abspath(batch_path)),
                            f"CACHE TABLE batch AS SELECT * FROM parquet.`{os.path.abspath(batch_path)}`",
                            catalog="spark_catalog")
        return "batch"

    def upsert(self, work_dir, batch):
        answer = self._sql(work_dir, f"INSERT INTO {DB}.{TABLE} SELECT * FROM {batch}")
        [latest] = self._sql(work_dir, f"SELECT snapshot_id, delta_record_count FROM {DB}.`{TABLE}$snapshots` "
                                       "ORDER BY snapshot_id DESC LIMIT 1")["rows"]
        return {"snapshot_id": latest[0], "delta_record_count": latest[1], "statement_seconds": answer["seconds"]}

    def read_back(self, work_dir):
        """The connector's read of the table, written to Parquet by its Spark, read in files."""
        out = os.path.join(work_dir, "read-back")
        self._sql(work_dir, f"SELECT * FROM {DB}.{TABLE}", parquet=out)
        for path in sorted(glob.glob(os.path.join(out, "*.parquet"))):
            yield pq.read_table(path)

    def second_opinion(self, work_dir):
        """dbt-paimon's store reader on the connector's table (interoperability, not validity)."""
        from peers.store_reader import read_parts
        return read_parts(os.path.join(self._warehouse(work_dir), f"{DB}.db", TABLE))
