"""The packages list only: pyproject.toml holds the metadata, the dependencies and the package data.

pyproject.toml can either discover packages or list them, not both; we need both: every dbt_paimon.*
package as it is added, plus dbt.adapters.paimon (dbt/ and dbt/adapters/ are namespaces shared with
dbt-core, so they must not be packages of ours) and dbt_paimon.macros (mapped from macros/ by
pyproject's package-dir)."""

from setuptools import find_packages, setup

setup(packages=find_packages(include=["dbt_paimon", "dbt_paimon.*"]) + ["dbt.adapters.paimon", "dbt_paimon.macros"])
