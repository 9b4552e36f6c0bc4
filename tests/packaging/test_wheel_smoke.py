"""The built wheel joins a fresh environment with the newest releases its ranges allow, on another
Python than the suite's, and works there: `dbt --version` lists the plugin, two paimon_upsert models
run (one as the engine's Spark job, one reading the first through the `paimon` source), and pypaimon
2.1.0 reads both tables (tests/packaging/wheel_smoke.py). `dbt debug` (a Spark start of its own,
~30 s of the suite's two cores) is left to the smoke's runs by hand: the run shows the profile
connects, and the suite's object-store project runs `dbt debug`.

The suite's own venv pins pyarrow 19 for pypaimon; this is where the runtime meets the newest
pyarrow, numpy, pandas and pyspark. A missing interpreter fails the test rather than skipping it: a
skipped smoke would let a broken wheel pass. DBT_PAIMON_SMOKE_PYTHON names another interpreter.
"""

import os

import dbt_paimon
from tests.packaging.wheel_smoke import smoke


def test_wheel_installs_and_runs_with_the_newest_releases_on_another_python():
    found = smoke(os.environ.get("DBT_PAIMON_SMOKE_PYTHON"), log=lambda message: None, debug=False)
    print(found)  # the versions it ran with and the seconds per step (pytest -s, or on failure)
    assert found["versions"]["dbt-paimon"] == dbt_paimon.__version__
