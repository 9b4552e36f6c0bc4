"""The systems under test, one module each, behind the Peer interface of peers.base.

ORDER is the order of the report; the first is the reference every ratio is taken against.
"""

from importlib import import_module

ORDER = ["dbt-paimon", "dbt-paimon-full-compaction", "dbt-paimon-no-index", "dbt-paimon-distributed", "dbt-run",
         "pypaimon-rust", "paimon-spark", "paimon-spark-2.0", "delta-merge", "delta-merge-dv", "iceberg-merge-cow",
         "iceberg-merge-mor", "pypaimon", "deltalake", "pyiceberg", "pyarrow-probe"]
_MODULES = {
    "dbt-paimon": "dbt_paimon_engine",
    "dbt-paimon-full-compaction": "dbt_paimon_full_compaction",
    "dbt-paimon-no-index": "dbt_paimon_no_index",
    "dbt-paimon-distributed": "dbt_paimon_distributed",
    "dbt-run": "dbt_run",
    "pypaimon-rust": "pypaimon_rust_native",
    "paimon-spark": "paimon_spark_sql",
    "paimon-spark-2.0": "paimon_spark_2",
    "delta-merge": "delta_merge",
    "delta-merge-dv": "delta_merge_dv",
    "iceberg-merge-cow": "iceberg_merge_cow",
    "iceberg-merge-mor": "iceberg_merge_mor",
    "pypaimon": "pypaimon_python",
    "deltalake": "deltalake_merge",
    "pyiceberg": "pyiceberg_upsert",
    "pyarrow-probe": "pyarrow_probe",
}
REFERENCE = ORDER[0]


def get(name: str):
    """A fresh Peer instance for a system name (its module is imported only now)."""
    return import_module(f"peers.{_MODULES[name]}").Peer()
