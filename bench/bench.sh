#!/usr/bin/env bash
# Benchmarks against the peers: sets up bench/.venv (first time, or when pyproject.toml, setup.py,
# constraints.txt or bench/requirements.txt change), then runs bench/run.py with the given arguments.
#   bash bench/bench.sh --workload W1            # see: bash bench/bench.sh --help
#   bash bench/bench.sh read --workload W1       # the format read bench (format_read_bench.py --help)
#   bash bench/bench.sh changes                  # the changes read bench (changes_bench.py --help)
#   bash bench/bench.sh dbt                      # dbt build on dbt-paimon, Delta, Iceberg (dbt_build_bench.py --help)
# A separate venv: the peers (deltalake, pyiceberg, pypaimon-rust, matplotlib) are no project deps.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
VENV=bench/.venv
STAMP="$VENV/.installed-$(cat pyproject.toml setup.py constraints.txt bench/requirements.txt | sha1sum | cut -c1-12)"
if [ ! -f "$STAMP" ]; then
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  # the project's pins (constraints.txt) hold for the peers' dependencies too: one resolve, by uv
  # (pinned in constraints.txt) as run.sh installs .venv: seconds where pip took minutes
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -c constraints.txt uv
  "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" -c constraints.txt -e '.[test]' -r bench/requirements.txt
  rm -f "$VENV"/.installed-*; touch "$STAMP"
fi
export PYTHONHASHSEED=0
# `read ...`: the format read bench (Delta, Iceberg, Paimon 2.0 and dbt-paimon on each one's Spark);
# it and the Spark-based upsert peers build their side venvs and fetch their jars themselves (spark_side.py)
if [ "${1:-}" = read ]; then shift; exec "$VENV/bin/python" bench/format_read_bench.py "$@"; fi
# `changes ...`: reading a table's changes against reading the table (changes_bench.py --help)
if [ "${1:-}" = changes ]; then shift; exec "$VENV/bin/python" bench/changes_bench.py "$@"; fi
# `dbt ...`: one dbt project built by dbt-paimon and by dbt-spark on Delta and on Iceberg (dbt_build_bench.py --help)
if [ "${1:-}" = dbt ]; then shift; exec "$VENV/bin/python" bench/dbt_build_bench.py "$@"; fi
exec "$VENV/bin/python" bench/run.py "$@"
