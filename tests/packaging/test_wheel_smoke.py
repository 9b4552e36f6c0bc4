"""The built wheel joins a fresh environment on another Python than the suite's, with the newest
releases its ranges allow except pyspark, which is the oldest line they admit, and works there:
`dbt --version` lists the plugin, three paimon_upsert models run (one as the engine's Spark job, two
reading the first, its rows and its snapshots system table, and upserted in the driver), and pypaimon
2.1.0 reads the tables (tests/packaging/wheel_smoke.py). `dbt debug` (a Spark start of its own, ~30 s of the
suite's two cores) is left to the smoke's runs by hand: the run shows the profile connects, and the
suite's object-store project runs `dbt debug`.

The suite's own venv pins pyarrow 19 for pypaimon, and the newest pyspark (constraints.txt); this is
where the runtime meets the newest pyarrow, numpy and pandas, and pyspark 4.0: the engine reads
pyspark APIs that changed within 4.x (to_arrow_schema's time zone argument, the Arrow collect
socket), so the bottom of the range is run as well as the top. 4.0.1 is the release the Paimon 2.0
connector's venv installs in the same run (tests/paimon_spark/side_env.py), so uv builds its sdist
once. A missing interpreter fails the test rather than skipping it: a skipped smoke would let a
broken wheel pass. DBT_PAIMON_SMOKE_PYTHON names another interpreter.
"""

import os

import dbt_paimon
from tests.java_paimon.reference import SPARK_CONNECTOR_2_PYSPARK
from tests.packaging.wheel_smoke import smoke

LOWEST_PYSPARK = SPARK_CONNECTOR_2_PYSPARK


def test_wheel_installs_and_runs_with_the_newest_releases_and_the_oldest_pyspark_on_another_python():
    found = smoke(os.environ.get("DBT_PAIMON_SMOKE_PYTHON"), pip_args=[f"pyspark=={LOWEST_PYSPARK}"],
                  log=lambda message: None, debug=False)
    print(found)  # the versions it ran with and the seconds per step (pytest -s, or on failure)
    assert found["versions"]["dbt-paimon"] == dbt_paimon.__version__
    assert found["versions"]["pyspark"] == LOWEST_PYSPARK
