"""Spark settings of the suite's own SparkSessions (tests/conftest.py's `spark`, the dbt functional
suite's profile in integration_tests/conftest.py), beyond what the adapter sets.

Catalyst's expressions interpreted rather than compiled: a test's queries are many, small and
mostly seen once, so compiling each to Java (Janino), then JIT-compiling and unloading the classes,
cost more than running it. On the dbt snapshot suite: 167 -> 139 s, the Spark JVM's CPU 155 -> 117 s
(one run each; runs of one file differ by up to 20% on these 2 cores).
Spark runs its own test suites in this mode too; results are the same by Spark's contract. The
sessions a user's command starts (the integration project's child processes, the cluster's
applications, the wheel smoke) keep Spark's defaults.
"""

INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
