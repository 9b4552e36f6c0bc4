from setuptools import find_packages, setup

setup(
    name="dbt-paimon",
    version="0.1.0",
    description="Keep Apache Paimon primary-key tables up to date from dbt, on Spark",
    packages=find_packages(include=["dbt_paimon", "dbt_paimon.*"]) + ["dbt.adapters.paimon", "dbt_paimon.macros"],
    # the dbt macros live at the top level (macros/) and ship as package data of dbt_paimon.macros
    package_dir={"dbt_paimon.macros": "macros"},
    package_data={"dbt_paimon.macros": ["*.yml", "*.sql", "*/*.sql"], "dbt_paimon.adapter": ["log4j2.properties"]},
    python_requires=">=3.11,<3.12",
    install_requires=[
        "pyarrow==19.0.1",
        # object-store warehouses (S3, GCS, Azure): Rust's object_store, with create-only PUTs
        "obstore==0.12.1",
        "fastavro==1.13.1",
        "backports.zstd==1.3.0",  # fastavro's zstandard codec (Paimon's manifests) on Python < 3.14
        "numpy==2.4.6",
        "pyspark==4.3.0",
        # dbt-core 1.12 depends on a package whose build downloads a binary: stay below it
        "dbt-core==1.11.16",
        "dbt-adapters==1.24.5",
        "dbt-spark[session]==1.11.0",
    ],
    extras_require={
        "test": [
            "pytest==9.2.0",
            "hypothesis==6.170.15",
            "pypaimon==2.1.0",
            # a local S3-compatible server for the object-store tests (boto3 comes with it)
            "moto[server]==5.2.5",
            "pandas==2.3.3",
            "dbt-tests-adapter==1.20.0",
        ],
    },
)
