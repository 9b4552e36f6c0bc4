"""iceberg-merge-cow: see formats.py (the statements) and peers/spark_format.py (how it runs)."""

from peers.spark_format import SparkFormatPeer


class Peer(SparkFormatPeer):
    format_name = "iceberg-merge-cow"
