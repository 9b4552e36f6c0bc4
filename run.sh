#!/usr/bin/env bash
# One entry point for a fresh machine (Python 3.10-3.13 + Java 17): sets up .venv, then runs a job.
#   bash run.sh demo   - the demo
#   bash run.sh test   - the whole test suite
#   bash run.sh bench  - benchmarks against the peers (bench/run.py, in bench/.venv)
# PYTHON=python3.12 bash run.sh test picks the interpreter (default python3.11); .venv is rebuilt
# when it was made by another Python version. The versions installed are constraints.txt's pins.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3.11}
VENV=.venv
PY_VERSION=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
# A new stamp (so a reinstall) when the metadata, the pins or the interpreter change
STAMP="$VENV/.installed-$({ cat pyproject.toml setup.py constraints.txt; echo "$PY_VERSION bytecode"; } | sha1sum | cut -c1-12)"
if [ ! -f "$STAMP" ]; then
  if [ -x "$VENV/bin/python" ] && [ "$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" != "$PY_VERSION" ]; then
    rm -rf "$VENV"
  fi
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  # uv (pinned in constraints.txt) installs the pins in a fraction of pip's time: on these 2 cores
  # most of a fresh clone's set-up was pip resolving, downloading and building pyspark's sdist
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -c constraints.txt uv
  "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" -c constraints.txt -e '.[test]'
  # The venv's modules compiled once (~12 s): every process of the suite (workers, dbt and Spark
  # children) then reads them, also where PYTHONDONTWRITEBYTECODE keeps Python from caching them
  # itself (importing pyspark, pandas, pyarrow and dbt from source costs each process 2-3 s more)
  "$VENV/bin/python" -m compileall -qq -j 0 "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  rm -f "$VENV"/.installed-*; touch "$STAMP"
fi
# dbt lists the plugins it finds in site-packages/dbt/adapters/ (`dbt --version`, `dbt init`), which an
# editable install leaves empty: the plugin's directory is linked there, as a link-tree editable install
# would, so this venv lists paimon like any dbt environment and still runs the checkout's code.
ADAPTERS=$("$VENV/bin/python" -c 'import dbt.adapters, os; print(os.path.dirname(dbt.adapters.__file__))')
[ -e "$ADAPTERS/paimon" ] || ln -s "$PWD/dbt/adapters/paimon" "$ADAPTERS/paimon"
export PYTHONHASHSEED=0
case "${1:-}" in
  demo)  shift; exec "$VENV/bin/python" -m dbt_paimon.demo "$@" ;;
  test)  shift
         # Python caches what it compiles (the suite's own modules, pytest's rewritten test modules)
         # even where PYTHONDONTWRITEBYTECODE says not to: each worker and child process would
         # otherwise compile them again (3-4 s per pytest worker). The caches are __pycache__/
         # directories, which git ignores.
         unset PYTHONDONTWRITEBYTECODE
         # Java Paimon for the oracle tests: the jar pinned in tests/java_paimon/reference.py, through Maven
         # (once; cached in .work/)
         "$VENV/bin/python" tests/java_paimon/fetch_jar.py >/dev/null
         # uv keeps every build of pyspark's sdist it ever made (a new one whenever the index's copy is
         # revalidated: ~1.9 GB each, three per run of the suite); what no install can reach any more
         # goes now, before the suite's own installs run beside each other (a full disk fails the run)
         "$VENV/bin/uv" cache prune -q
         # Paimon's Spark connectors for tests/paimon_spark: their jars, and a venv per release with the
         # pyspark it is built for (once; cached in .work/). Built beside the first tests, which need
         # none of them (a fixture that does waits for the build, and reports its failure)
         mkdir -p .work
         "$VENV/bin/python" tests/paimon_spark/side_env.py >.work/side-env.log 2>&1 &
         # The linter first (pyproject.toml [tool.ruff] says which rules and why): a finding fails the run
         "$VENV/bin/ruff" check --quiet .
         # Two workers (tests/schedule.py says how the suite is shared); `-n 0` after it runs one process
         exec "$VENV/bin/python" -m pytest -q -n 2 --dist loadscope --no-loadscope-reorder "$@" ;;
  bench) shift; exec bash bench/bench.sh "$@" ;;
  *) echo "usage: bash run.sh demo|test|bench" >&2; exit 2 ;;
esac
