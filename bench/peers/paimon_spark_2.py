"""paimon-spark-2.0: Paimon 2.0.0's own Spark 4.0 connector, `INSERT INTO` the cross-partition table
(primary key id, partitioned by dt, bucket -1). See formats.py and peers/spark_format.py."""

import os

from peers.spark_format import TAG, SparkFormatPeer


class Peer(SparkFormatPeer):
    format_name = "paimon-spark-2.0"
    second_reader = "dbt-paimon store reader"

    def second_opinion(self, work_dir):
        """dbt-paimon's store reader on the connector's table (interoperability, not validity)."""
        from peers.store_reader import read_parts
        return read_parts(os.path.join(os.path.abspath(work_dir), "paimon", "db.db", self.fmt.ident(TAG)))
