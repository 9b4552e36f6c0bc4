"""The Paimon releases the tests hold us against, named once: moving to the next release is one change here.

The Maven Central this project's machines reach serves only part of Paimon. Of the 2.x line it serves no
`paimon-bundle`, and `paimon-core` 2.0.0 without the modules it needs (`paimon-common`, `paimon-format`); it
does serve `paimon-flink-2.0` 2.0.0, Paimon's Flink 2.0 connector, whose jar bundles Paimon 2.0.0's core,
formats and codegen (shaded) beside its Flink classes. The oracle runs Paimon's core API from that jar (no
Flink class is loaded). Its S3 file system comes from `paimon-s3` 1.4.2, the newest served (a FileIO plugin
the 2.0.0 core loads). The newest Spark connector served is `paimon-spark-3.5` 0.9.0 (Spark 3.5, Scala 2.12);
none of 1.x or 2.x (`paimon-spark-4.x[_2.13]`, `paimon-spark-3.5[_2.12]`) is served. Paimon 2.0.0's
connector for Spark 4.0 is asked of Maven first (a machine elsewhere is served it) and otherwise taken
from `shared/jars/` beside the repository (a build of the release's source, its README says how),
checked against the same pin.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Artifact:
    group: str
    name: str
    version: str
    sha256: str  # of the jar as first fetched: a changed or truncated download is refused, not run

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.name}:{self.version}"

    @property
    def jar(self) -> str:
        return f"{self.name}-{self.version}.jar"


# Paimon's Java core, formats included: the reader and writer the tests compare ours with (2.0.0, from the
# jar of its Flink 2.0 connector, the only 2.x jar served that holds them).
PAIMON = Artifact("org.apache.paimon", "paimon-flink-2.0", "2.0.0",
                  "f9999454cd1827da1a96556a6ef0525a98fddcfa4370837a51119fecc181f5f0")

# Paimon's S3 file system (Hadoop's S3A, shaded), for the oracle's reads on the S3 test server: the newest
# release served (no 2.x).
PAIMON_S3 = Artifact("org.apache.paimon", "paimon-s3", "1.4.2",
                     "dc701f0c5b2790680032ec8961dfbb857e968f9f023563a7077fffd0750d0a67")

# Paimon's Spark connector (its SparkCatalog, SQL writes and procedures): the writer a dbt-on-Spark user would
# otherwise pick, run by tests/paimon_spark in a side environment with the pyspark it is built for.
SPARK_CONNECTOR = Artifact("org.apache.paimon", "paimon-spark-3.5", "0.9.0",
                           "e9e8a90a630a1440dfd869bb568c8fc916d6de23bc162922cc0c2684ed6fa15b")
SPARK_CONNECTOR_PYSPARK = "3.5.7"

# Paimon 2.0.0's own Spark connector, for Spark 4.0 (Scala 2.13): the current release's reader and writer
# on Spark. It does not start on Spark 4.1 (its Spark4Shim needs a class 4.1 moved), hence its own pyspark.
SPARK_CONNECTOR_2 = Artifact("org.apache.paimon", "paimon-spark-4.0_2.13", "2.0.0",
                             "4f625dad4da53bcdf8232fb8d7871e3d5e9ed8f2f2b406922113ae773872ee87")
SPARK_CONNECTOR_2_PYSPARK = "4.0.1"
