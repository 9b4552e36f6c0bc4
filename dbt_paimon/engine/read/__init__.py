"""Reads of Paimon tables on Spark: a snapshot as a Spark plan (native.py) whose files that need no
merge are read by Spark's own Parquet reader, and the queries of Spark SQL on catalog tables given
that plan (query.py). The `paimon` Python data source (engine/source.py) reads what needs a merge."""
