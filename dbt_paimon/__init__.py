"""dbt-paimon: keep Apache Paimon primary-key tables up to date from dbt, on Spark."""

__version__ = "0.1.0"
