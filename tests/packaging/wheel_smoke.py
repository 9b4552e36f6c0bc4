"""The wheel as a user gets it: build it, install it with no constraints (the newest releases its
ranges allow) into a fresh venv on another Python, and use it from dbt; then read what it wrote with
pypaimon 2.1.0 from this interpreter (the test venv: pypaimon needs pyarrow < 20, the runtime does not).

    python -m tests.packaging.wheel_smoke [--python python3.13] [--pip-arg=...]   # from the repository root

The test suite runs it once (tests/packaging/test_wheel_smoke.py); run by hand it checks one cell of
the supported matrix: --python python3.10, or the oldest releases the ranges admit with
--pip-arg=-c --pip-arg=tests/packaging/lowest-constraints.txt.

The venv is kept under .work/smoke-venvs/, keyed by the interpreter, the wheel's requirements and the
extra pip arguments (with the content of the files they name): a later run with the same key only
reinstalls our wheel (seconds), so the "newest" releases are those of the first run; delete the
directory to take newer ones. One venv is kept per interpreter and pip arguments.
"""

from __future__ import annotations

import argparse
import email.parser
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENVS = os.path.join(ROOT, ".work", "smoke-venvs")
# What a built wheel needs from the checkout (copied, so no stale build/ of the work tree gets in)
SOURCES = ("pyproject.toml", "setup.py", "README.md", "dbt_paimon", "dbt", "macros")
# Interpreters tried, newest first, when none is named: the suite itself runs on 3.11
CANDIDATES = ("3.13", "3.12", "3.10")
# Files that must be inside the wheel besides every dbt_paimon package and every file of macros/:
# dbt's entry point and the log settings Spark starts with
REQUIRED_FILES = ("dbt/adapters/paimon/__init__.py", "dbt/adapters/paimon/__version__.py",
                  "dbt_paimon/adapter/log4j2.properties")

# customers: a cross-partition table (the key lacks the partition field) written by the engine's
# Spark job (the code most tied to pyspark's and pyarrow's APIs); customer 1 comes twice, the later
# row wins. by_country reads it back through the `paimon` Python data source and is upserted in the
# driver (execution auto on a local master); its post-hook's INSERT ... REPLACE WHERE is a plan of
# its own before Spark 4.3 (OverwriteByExpression: sql/dml.py). customer_snapshots reads a system
# table, rows Spark has no size estimate of: the driver takes them through Spark's Arrow collect
# stream (engine/runtime/local.py, pyspark APIs that changed within 4.x).
MODELS = {
    "customers": """\
{{ config(materialized='paimon_upsert', unique_key='customer_id', partition_by='country',
          sequence_by='updated_at', execution='distributed') }}
select * from values
    (cast(1 as bigint), 'Ann', 'NL', timestamp'2024-01-01 10:00:00'),
    (cast(2 as bigint), 'Bob', 'DE', timestamp'2024-01-01 10:00:00'),
    (cast(1 as bigint), 'Ann', 'BE', timestamp'2024-01-02 10:00:00'),
    (cast(3 as bigint), 'Cas', 'NL', timestamp'2024-01-01 10:00:00'),
    (cast(4 as bigint), 'Dan', 'NL', timestamp'2024-01-01 10:00:00')
  as t(customer_id, name, country, updated_at)
""",
    "by_country": """\
{{ config(materialized='paimon_upsert', unique_key='country',
          post_hook="insert into {{ this }} replace where country = 'DE' select 'DE', 7") }}
select country, count(*) as customers from {{ ref('customers') }} group by country
""",
    "customer_snapshots": """\
{{ config(materialized='paimon_upsert', unique_key='snapshot_id') }}
select snapshot_id, commit_kind, commit_time from {{ paimon_system_table(ref('customers'), 'snapshots') }}
""",
}
# model -> (columns read back, their rows as pypaimon reads them, the start of dbt's run message)
EXPECTED = {
    "customers": (("customer_id", "name", "country"),
                  [(1, "Ann", "BE"), (2, "Bob", "DE"), (3, "Cas", "NL"), (4, "Dan", "NL")],
                  "UPSERT 5: 4 inserted, 0 updated, 1 skipped"),
    "by_country": (("country", "customers"), [("BE", 1), ("DE", 7), ("NL", 2)], "UPSERT 3: 3 inserted"),
    "customer_snapshots": (("snapshot_id", "commit_kind"), [(1, "APPEND")], "UPSERT 1: 1 inserted"),
}


class SmokeFailed(AssertionError):
    pass


def _run(cmd: list[str], *, env: dict | None = None, cwd: str | None = None, timeout: float = 600) -> str:
    """Runs cmd; its combined output, or SmokeFailed with the output's tail."""
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    if p.returncode != 0:
        raise SmokeFailed(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-6000:]}")
    return p.stdout


def find_python(wanted: str | None = None) -> str:
    """An interpreter command for `wanted` ("python3.13", "3.13" or a path), or the first of
    CANDIDATES that runs and is not this interpreter's minor version. A pyenv shim whose version is not
    selected (pyenv: "python3.13: command not found") is resolved through `pyenv which`."""
    names = [wanted] if wanted else [f"python{v}" for v in CANDIDATES if v != "%d.%d" % sys.version_info[:2]]
    names = [f"python{n}" if n[0].isdigit() else n for n in names]
    for name in names:
        if _works(name):
            return name
        resolved = _pyenv(name)
        if resolved:
            return resolved
    raise SmokeFailed(f"no interpreter among {', '.join(names)} runs here; the smoke test needs one of them "
                      f"(set DBT_PAIMON_SMOKE_PYTHON to another interpreter)")


def _works(cmd: str) -> bool:
    try:
        return subprocess.run([cmd, "-c", "pass"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _pyenv(name: str) -> str | None:
    pyenv = shutil.which("pyenv")
    minor = name.rsplit("python", 1)[-1]
    if pyenv is None or not minor[:1].isdigit():
        return None
    versions = subprocess.run([pyenv, "versions", "--bare"], capture_output=True, text=True).stdout.split()
    ours = [v for v in versions if v.startswith(minor + ".") and v.replace(".", "").isdigit()]
    for version in sorted(ours, key=lambda v: tuple(map(int, v.split("."))), reverse=True):  # newest patch
        env = dict(os.environ, PYENV_VERSION=version)
        p = subprocess.run([pyenv, "which", name], capture_output=True, text=True, env=env)
        path = p.stdout.strip()
        if p.returncode == 0 and _works(path):
            return path
    return None


def build_wheel(out_dir: str) -> str:
    """Builds the wheel from a copy of the checkout's sources (pip wheel, in an isolated build env)
    and checks that the package data is inside it."""
    src = os.path.join(out_dir, "src")
    for name in SOURCES:
        path = os.path.join(ROOT, name)
        if os.path.isdir(path):
            shutil.copytree(path, os.path.join(src, name), ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            os.makedirs(src, exist_ok=True)
            shutil.copy2(path, src)
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check", "-w", out_dir, src])
    [wheel] = [os.path.join(out_dir, n) for n in os.listdir(out_dir) if n.endswith(".whl")]
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [f for f in [*REQUIRED_FILES, *_expected_files()] if f not in names]
    if missing:
        raise SmokeFailed(f"the wheel lacks {missing}")
    return wheel


def _expected_files() -> list[str]:
    """Every dbt_paimon package's __init__.py and every macros/ file, by its path in the wheel."""
    found = []
    for top, into in (("dbt_paimon", "dbt_paimon"), ("macros", "dbt_paimon/macros")):
        for here, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            rel = os.path.relpath(here, os.path.join(ROOT, top)).replace(os.sep, "/")
            prefix = into if rel == "." else f"{into}/{rel}"
            if top == "macros":
                found += [f"{prefix}/{f}" for f in files]
            elif "__init__.py" in files:
                found.append(f"{prefix}/__init__.py")
    return found


def wheel_metadata(wheel: str):
    with zipfile.ZipFile(wheel) as z:
        [meta] = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(z.read(meta).decode())


def wheel_requirements(wheel: str) -> str:
    msg = wheel_metadata(wheel)
    return "\n".join([msg.get("Requires-Python", ""), *sorted(msg.get_all("Requires-Dist") or [])])


def venv_for(python: str, wheel: str, pip_args: list[str]) -> tuple[str, float]:
    """A venv with the wheel installed and the seconds it took: the cached venv of this key with the
    wheel reinstalled (no dependency changes), or a new one with every dependency resolved afresh."""
    version = _run([python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"]).strip()
    args = hashlib.sha256("\n".join(_with_content(pip_args)).encode()).hexdigest()[:6]
    deps = hashlib.sha256(wheel_requirements(wheel).encode()).hexdigest()[:8]
    prefix = f"py{version}-{args}-"
    venv = os.path.join(VENVS, prefix + deps)
    vpy = os.path.join(venv, "bin", "python")
    pip = _installer(vpy)
    started = time.time()
    if os.path.exists(os.path.join(venv, ".complete")):
        _run([*pip, "--no-deps", "--reinstall" if pip[0] != vpy else "--force-reinstall", wheel])
    else:
        shutil.rmtree(venv, ignore_errors=True)
        for old in os.listdir(VENVS) if os.path.isdir(VENVS) else []:  # older requirements' venvs
            if old.startswith(prefix):
                shutil.rmtree(os.path.join(VENVS, old), ignore_errors=True)
        _run([python, "-m", "venv", venv])
        # --use-pep517 (pip): older pips would run pyspark's (an sdist) setup.py install without `wheel`
        _run([*pip, *(["--use-pep517"] if pip[0] == vpy else []), wheel, *pip_args], timeout=1200)
        open(os.path.join(venv, ".complete"), "w").close()
    return venv, time.time() - started


def _installer(vpy: str) -> list[str]:
    """`uv pip install` into the venv when uv is at hand (the test venv has it, pinned): it resolves
    the same newest releases as pip, and a fresh clone's install took 3 of pip's minutes on these 2
    cores, pyspark's sdist build mostly (uv builds it too, in parallel with the downloads). Else pip."""
    uv = shutil.which("uv") or os.path.join(os.path.dirname(sys.executable), "uv")
    if os.path.exists(uv):
        return [uv, "pip", "install", "-q", "--python", vpy]
    return [vpy, "-m", "pip", "install", "-q", "--disable-pip-version-check"]


def _with_content(pip_args: list[str]) -> list[str]:
    """The pip arguments, each file one (a constraints file) followed by its content."""
    out = []
    for arg in pip_args:
        out.append(arg)
        if os.path.isfile(arg):
            with open(arg) as f:
                out.append(f.read())
    return out


def clean_env(venv: str) -> dict:
    """The environment of a user's shell with only the new venv on PATH: none of this test process's
    Python settings (conftest sets PYSPARK_PYTHON to the test venv's interpreter)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYSPARK_", "PYTHON", "VIRTUAL_ENV", "SPARK_", "DBT_"))}
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
    env["VIRTUAL_ENV"] = venv
    env["DBT_SEND_ANONYMOUS_USAGE_STATS"] = "false"
    return env


def write_project(project: str) -> str:
    """A dbt project with the paimon_upsert models; returns the warehouse directory."""
    warehouse = os.path.join(project, "warehouse")
    os.makedirs(os.path.join(project, "models"))
    with open(os.path.join(project, "dbt_project.yml"), "w") as f:
        f.write("name: smoke\nversion: '1.0'\nconfig-version: 2\nprofile: smoke\nmodel-paths: [models]\n")
    with open(os.path.join(project, "profiles.yml"), "w") as f:
        f.write("smoke:\n  target: dev\n  outputs:\n    dev:\n      type: paimon\n      schema: smoke\n"
                f"      warehouse: {json.dumps(warehouse)}\n      master: 'local[1]'\n      threads: 1\n"
                "      server_side_parameters:\n        spark.sql.shuffle.partitions: '1'\n"
                "        spark.driver.memory: '1g'\n")
    for name, sql in MODELS.items():
        with open(os.path.join(project, "models", f"{name}.sql"), "w") as f:
            f.write(sql)
    return warehouse


def read_with_pypaimon(table_path: str, columns: tuple[str, ...]) -> list[tuple]:
    if ROOT not in sys.path:  # run as a script
        sys.path.insert(0, ROOT)
    from tests.oracle import pypaimon_read

    t = pypaimon_read(table_path)
    return sorted(zip(*(t.column(c).to_pylist() for c in columns)))


def smoke(python: str | None = None, pip_args: list[str] | None = None, log=print, debug: bool = True) -> dict:
    """The whole smoke run; returns what it found (versions, seconds per step). Raises SmokeFailed.
    debug: run `dbt debug` too (a Spark start of its own)."""
    pip_args = list(pip_args or [])
    seconds = {}
    python = find_python(python)
    with tempfile.TemporaryDirectory(prefix="dbt-paimon-smoke-") as tmp:
        started = time.time()
        wheel = build_wheel(os.path.join(tmp, "dist"))
        seconds["build"] = time.time() - started
        venv, seconds["install"] = venv_for(python, wheel, pip_args)
        env = clean_env(venv)
        dbt = os.path.join(venv, "bin", "dbt")
        versions = json.loads(_run([os.path.join(venv, "bin", "python"), "-c", (
            "import json, sys; from importlib.metadata import version\n"
            "names = ['dbt-paimon', 'dbt-core', 'dbt-adapters', 'dbt-spark', 'pyspark', 'pyarrow', 'numpy',"
            " 'pandas', 'fastavro', 'obstore']\n"
            "print(json.dumps({'python': sys.version.split()[0], **{n: version(n) for n in names}}))")], env=env))
        log(f"smoke venv {venv}: {versions}")

        started = time.time()
        out = _run([dbt, "--version"], env=env)
        if f"- paimon: {wheel_metadata(wheel)['Version']}" not in out:
            raise SmokeFailed(f"`dbt --version` does not list the paimon plugin:\n{out}")
        seconds["dbt --version"] = time.time() - started

        project = os.path.join(tmp, "project")
        warehouse = write_project(project)
        where = ["--project-dir", project, "--profiles-dir", project]
        if debug:
            started = time.time()
            out = _run([dbt, "debug", *where], env=env, cwd=project)
            if "All checks passed!" not in out:
                raise SmokeFailed(f"dbt debug did not pass:\n{out}")
            seconds["dbt debug"] = time.time() - started

        started = time.time()
        out = _run([dbt, "run", *where], env=env, cwd=project)
        with open(os.path.join(project, "target", "run_results.json")) as f:
            results = {r["unique_id"].split(".")[-1]: r for r in json.load(f)["results"]}
        messages = {name: results[name]["message"] for name in MODELS}
        for name, (_, _, message) in EXPECTED.items():
            r = results[name]
            if r["status"] != "success" or not (r["message"] or "").startswith(message):
                raise SmokeFailed(f"dbt run of {name}: {r['status']} {r['message']!r}\n{out[-4000:]}")
        if results["customers"]["adapter_response"].get("execution") != "distributed":
            raise SmokeFailed(f"customers did not run as a Spark job: {results['customers']['adapter_response']}")
        seconds["dbt run"] = time.time() - started

        started = time.time()
        for name, (columns, rows, _) in EXPECTED.items():
            got = read_with_pypaimon(os.path.join(warehouse, "smoke.db", name), columns)
            if got != rows:
                raise SmokeFailed(f"pypaimon read {got} from {name}, expected {rows}")
        seconds["pypaimon read"] = time.time() - started
    return {"versions": versions, "messages": messages, "seconds": {k: round(v, 1) for k, v in seconds.items()}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", help="interpreter for the new venv (default: 3.13, 3.12 or 3.10)")
    parser.add_argument("--pip-arg", action="append", default=[], help="extra pip install argument (repeatable)")
    args = parser.parse_args(argv)
    started = time.time()
    found = smoke(args.python or os.environ.get("DBT_PAIMON_SMOKE_PYTHON"), args.pip_arg)
    print(json.dumps({**found, "total seconds": round(time.time() - started, 1)}, indent=1))


if __name__ == "__main__":
    main()
