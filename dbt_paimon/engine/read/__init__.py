"""Reads of Paimon tables on Spark: a snapshot as a Spark plan (native.py) whose files that need no
merge are read by Spark's own Parquet reader, and the `paimon` Python data source (source.py) for
what needs a merge. Spark SQL's queries on catalog tables are given that plan by dbt_paimon.sql."""
