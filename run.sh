#!/usr/bin/env bash
# One entry point for a fresh machine (Python 3.11 + Java 17): sets up .venv, then runs a job.
#   bash run.sh demo   - the demo
#   bash run.sh test   - the whole test suite
#   bash run.sh bench  - benchmarks against the peers (bench/run.py, in bench/.venv)
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3.11}
VENV=.venv
STAMP="$VENV/.installed-$(cat setup.py | sha1sum | cut -c1-12)"
if [ ! -f "$STAMP" ]; then
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e '.[test]'
  rm -f "$VENV"/.installed-*; touch "$STAMP"
fi
export PYTHONHASHSEED=0
case "${1:-}" in
  demo)  shift; exec "$VENV/bin/python" -m dbt_paimon.demo "$@" ;;
  test)  shift
         # Java Paimon 0.9 for tests/java_paimon: its jar from the pypaimon 0.2.0 sdist (once; cached in .work/)
         "$VENV/bin/python" tests/java_paimon/fetch_jar.py >/dev/null
         exec "$VENV/bin/python" -m pytest -q "$@" ;;
  bench) shift; exec bash bench/bench.sh "$@" ;;
  *) echo "usage: bash run.sh demo|test|bench" >&2; exit 2 ;;
esac
