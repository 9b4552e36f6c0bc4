from setuptools import find_packages, setup

setup(
    name="dbt-paimon",
    version="0.1.0",
    description="Keep Apache Paimon primary-key tables up to date from dbt, on Spark",
    packages=find_packages(include=["dbt_paimon", "dbt_paimon.*"]),
    python_requires=">=3.11,<3.12",
    install_requires=[
        "pyarrow==19.0.1",
        "fastavro==1.13.1",
        "numpy==2.4.6",
        "pyspark==4.3.0",
    ],
    extras_require={
        "test": [
            "pytest==9.2.0",
            "hypothesis==6.170.15",
            "pypaimon==2.1.0",
            "pandas==2.3.3",
        ],
    },
)
