"""Getting the engine onto a cluster's executors, and checking they can run it before a job writes.

Our tasks are closures pickled by value whose globals name dbt_paimon's modules by reference, so an
executor's Python must import dbt_paimon (the same code as the driver's) and the wheels it uses.

- ship(spark): the dbt_paimon package as this driver imports it, zipped once per content hash and
  added with SparkContext.addPyFile once per application: executors put it first on sys.path, so
  they run the driver's code even where another version is installed. Pure Python, so it travels;
  the compiled wheels (pyarrow, numpy) cannot, and must be in the executors' Python already.
- check_executors(spark): one small job, a task per executor core, each importing those wheels and
  the shipped package and reporting versions and failures as data; any missing module or
  incompatible version is raised here as one ExecutorEnvironmentError naming them per host and
  how to provide them, before the job writes anything (not as a Python trace from inside a task).
- prepare(spark[, path]) = both, at the start of every distributed engine job.

Only on a cluster master: on `local[...]` the Python workers are started from the driver's own
interpreter on the same machine (the dbt adapter and the tests point PYSPARK_PYTHON at it), which
imports dbt_paimon exactly as the driver does; shipping there would only put a zip ahead of it on
every worker's sys.path (and, through addPyFile, on the driver's), and the check would cost a job.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sys
import tempfile
import threading
import time
import zipfile
from collections import defaultdict

from pyspark.sql import SparkSession

from . import local_session
from ...store.common.errors import PaimonError

log = logging.getLogger(__name__)

# The third-party modules our tasks import (backports.zstd: fastavro's zstandard codec, which our
# manifests use, on Python < 3.14; pyroaring: deletion vectors' bitmaps), and the one object-store
# warehouses add (store/common/fileio.py).
EXECUTOR_MODULES = ("pyarrow", "numpy", "fastavro", "backports.zstd", "pyroaring")
OBJECT_STORE_MODULES = ("obstore",)
# What the tasks import of ours; importing them on an executor also imports every wheel they use.
ENGINE_MODULES = ("dbt_paimon.engine.runtime.tasks", "dbt_paimon.engine.writes.compaction",
                  "dbt_paimon.engine.writes.delete", "dbt_paimon.engine.read.source")
# Versions that must agree with the driver's: tasks and their results are pickles, and pickles of
# numpy arrays and Arrow objects are not promised across major versions (numpy 1 cannot load a
# numpy 2 array: numpy._core); Spark refuses a different Python minor version itself.
SAME_MAJOR = ("pyarrow", "numpy")

_lock = threading.Lock()
_shipped: dict[str, str | None] = {}  # application id -> the zip's file name (None: nothing to ship)


class ExecutorEnvironmentError(PaimonError):
    """Spark's executors cannot run the engine's tasks: a missing module or an incompatible version."""


def is_cluster_master(master: str) -> bool:
    """True unless the master is local / local[...] (one JVM, Python workers of the driver's
    interpreter); local-cluster[...] starts executor JVMs of their own, so it counts as a cluster."""
    return not local_session.is_local_master(master)


def is_cluster(spark: SparkSession) -> bool:
    return is_cluster_master(spark.sparkContext.master)


# ---- ship --------------------------------------------------------------------------------------
def package_dir() -> str | None:
    """The directory this process imports dbt_paimon from; None when it comes from an archive
    (spark-submit --py-files), which Spark already gives to the executors."""
    import dbt_paimon

    root = os.path.dirname(os.path.abspath(dbt_paimon.__file__))
    return root if os.path.isdir(root) else None


def _files(root: str) -> list[str]:
    out = []
    for base, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        out += [os.path.join(base, n) for n in sorted(names) if not n.endswith((".pyc", ".pyo"))]
    return out


def package_zip(cache_dir: str | None = None, root: str | None = None) -> str | None:
    """dbt_paimon zipped as `dbt_paimon/...`, named by a hash of its files' names and contents, so a
    changed source makes a new zip (and Spark, which refuses a second file of the same name with
    other contents, a new name). Kept in a cache directory: another process reuses it."""
    root = root or package_dir()
    if root is None:
        return None
    files = _files(root)
    digest = hashlib.sha256()
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        digest.update(f"{os.path.relpath(path, root)}\0{len(data)}\0".encode() + data)
    cache_dir = cache_dir or os.path.join(tempfile.gettempdir(), f"dbt-paimon-{os.getuid()}")
    os.makedirs(cache_dir, exist_ok=True)
    target = os.path.join(cache_dir, f"{os.path.basename(root)}-{digest.hexdigest()[:16]}.zip")
    if not os.path.exists(target):
        parent = os.path.dirname(root)
        scratch = f"{target}.{os.getpid()}.tmp"
        with zipfile.ZipFile(scratch, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in files:
                zf.write(path, os.path.relpath(path, parent))
        os.replace(scratch, target)  # atomic: a concurrent process sees no half-written zip
    return target


def ship(spark: SparkSession) -> str | None:
    """Give the executors of a cluster master this driver's dbt_paimon (once per application);
    the zip's path, or None on a local master or when there is nothing to ship."""
    if not is_cluster(spark):
        return None
    sc = spark.sparkContext
    with _lock:
        app = sc.applicationId
        if app not in _shipped:
            path = package_zip()
            if path is not None:
                sc.addPyFile(path)
                log.info("shipped dbt_paimon to the executors of %s as %s", app, os.path.basename(path))
            _shipped[app] = os.path.basename(path) if path else None
        return _shipped[app]


# ---- check -------------------------------------------------------------------------------------
def _probe_task(modules: tuple[str, ...], engine: tuple[str, ...]):
    """The check's task. A closure, so cloudpickle sends it by value: unpickling it on an executor
    needs nothing but pyspark, and it reports every failure as data instead of raising."""

    def run(_index, _rows):
        import importlib
        import os
        import re
        import socket
        import sys

        def attempt(name):
            try:
                return importlib.import_module(name), None
            except ImportError as e:  # name the module asked for, unless one it imports is missing
                missing = e.name or name
                return None, name if name.startswith(missing) else missing
            except Exception as e:  # noqa: BLE001 - e.g. a wheel built for another Python or CPU
                return None, f"{name} ({type(e).__name__}: {e})"

        versions, missing = {}, []
        for name in modules:
            module, failed = attempt(name)
            if failed:
                missing.append(failed)
            else:
                versions[name] = getattr(module, "__version__", "")
        origin = None
        if not missing:  # our modules import the wheels: a missing one would be reported twice
            for name in engine:
                _, failed = attempt(name)
                if failed and failed not in missing:
                    missing.append(failed)
            ours = sys.modules.get("dbt_paimon")
            origin = getattr(ours, "__file__", None)
        log_url = os.environ.get("SPARK_LOG_URL_STDERR", "")
        executor = re.search(r"executorId=([^&]+)", log_url)
        yield {"host": socket.gethostname(), "executor": executor.group(1) if executor else None,
               "cwd": os.getcwd(), "pid": os.getpid(), "python": "%d.%d.%d" % sys.version_info[:3],
               "executable": sys.executable, "path": list(sys.path), "versions": versions,
               "missing": missing, "dbt_paimon": origin}

    return run


def driver_versions(modules: tuple[str, ...] = SAME_MAJOR) -> dict[str, str]:
    import importlib

    out = {"python": "%d.%d.%d" % sys.version_info[:3]}
    for name in modules:
        out[name] = getattr(importlib.import_module(name), "__version__", "")
    return out


def _major(version: str, parts: int = 1) -> str:
    return ".".join(version.split(".")[:parts])


def problems(reports: list[dict], driver: dict[str, str], shipped: str | None) -> dict[str, list[str]]:
    """What is wrong per executor host (and Python), from the check's reports; empty when nothing."""
    out: dict[str, list[str]] = defaultdict(list)
    for r in reports:
        where = f"{r['host']} ({r['executable']}, Python {r['python']})"

        def add(text: str, where: str = where) -> None:
            if text not in out[where]:
                out[where].append(text)

        if r["missing"]:
            add("missing " + ", ".join(r["missing"]))
        if _major(r["python"], 2) != _major(driver["python"], 2):
            add(f"Python {r['python']} but the driver runs {driver['python']}")
        for name in SAME_MAJOR:
            theirs = r["versions"].get(name)
            if theirs and _major(theirs) != _major(driver[name]):
                add(f"{name} {theirs} but the driver has {driver[name]} (the major versions must agree)")
        if shipped and not r["missing"] and shipped not in (r["dbt_paimon"] or ""):
            add(f"imports dbt_paimon from {r['dbt_paimon']}, not the shipped {shipped}")
    return dict(out)


def how_to_fix(modules: tuple[str, ...]) -> str:
    wanted = _installed(modules)
    versions = " ".join(f"'{m}=={v}'" for m, v in wanted.items())
    return (f"Executors need Python {sys.version_info[0]}.{sys.version_info[1]} with {', '.join(wanted)} "
            "(dbt-paimon's own code is shipped with the job). Either give them a packed environment "
            f"(pip install {versions} into a venv, then venv-pack -o env.tar.gz, or conda-pack) and set "
            "spark.archives=env.tar.gz#env with PYSPARK_PYTHON=./env/bin/python (spark.pyspark.python "
            "under spark-submit); or install them on every node and point PYSPARK_PYTHON at that "
            "Python. Nothing was committed.")


def _installed(modules: tuple[str, ...]) -> dict[str, str]:
    """The driver's versions of the distributions providing modules (for the pip line)."""
    from importlib import metadata

    out = {}
    for name in modules:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def _job_failure(exc: Exception) -> str:
    """The one line that says why the check job itself could not run Python on the executors."""
    text = str(exc)
    for pattern in (r"\[PYTHON_VERSION_MISMATCH\][^\n]*", r"Cannot run program \"[^\"]*\"[^\n]*",
                    r"(?:ModuleNotFoundError|ImportError): [^\n]*", r"\w+(?:Error|Exception): [^\n]*"):
        m = re.search(pattern, text)
        if m:
            return m.group(0).strip().rstrip(".")
    return text.strip().splitlines()[0][:500] if text.strip() else type(exc).__name__


def check_executors(spark: SparkSession, modules: tuple[str, ...] = EXECUTOR_MODULES) -> list[dict]:
    """Run the check job (a task per executor core, so with every core free each executor runs
    one); its reports. Raises ExecutorEnvironmentError when an executor cannot run our tasks."""
    sc = spark.sparkContext
    shipped = _shipped.get(sc.applicationId)
    n = max(sc.defaultParallelism, 1)
    previous = sc.getLocalProperty("spark.job.description")
    sc.setLocalProperty("spark.job.description", "dbt-paimon: check the executors' Python")
    try:
        reports = sc.parallelize(range(n), n).mapPartitionsWithIndex(_probe_task(modules, ENGINE_MODULES)).collect()
    except Exception as e:  # noqa: BLE001 - the executors could not even start our task
        raise ExecutorEnvironmentError(
            f"Spark's executors cannot run Python tasks with PYSPARK_PYTHON={sc.pythonExec!r}: "
            f"{_job_failure(e)}. {how_to_fix(modules)}") from None
    finally:
        sc.setLocalProperty("spark.job.description", previous)
    found = problems(reports, driver_versions(), shipped)
    if found:
        lines = "\n".join(f"  {where}: {'; '.join(what)}" for where, what in sorted(found.items()))
        raise ExecutorEnvironmentError(f"Spark's executors cannot run dbt-paimon's tasks:\n{lines}\n"
                                       f"{how_to_fix(modules)}")
    return reports


def modules_for(path: str | None) -> tuple[str, ...]:
    """The executors' modules for a table at path: object stores add their client."""
    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", path or "")
    remote = scheme is not None and scheme.group(1).lower() != "file"
    return EXECUTOR_MODULES + (OBJECT_STORE_MODULES if remote else ())


def prepare(spark: SparkSession, path: str | None = None) -> list[dict]:
    """Before a distributed job writes: ship the engine and check the executors (a cluster master
    only); the check's reports (empty on a local master)."""
    if not is_cluster(spark):
        return []
    started = time.time()
    ship(spark)
    reports = check_executors(spark, modules_for(path))
    log.debug("checked %d executor task(s) in %.2fs", len(reports), time.time() - started)
    return reports


def missing_module_error(task_error: str) -> ExecutorEnvironmentError | None:
    """An engine task that failed importing a module (an executor that joined after the check):
    the same clear error as the check's, else None."""
    m = re.search(r"ModuleNotFoundError: No module named '([^']+)'", task_error)
    if not m:
        return None
    if m.group(1).split(".")[0] == "dbt_paimon":  # a SparkSession nobody shipped the engine to
        return ExecutorEnvironmentError(
            "an executor's Python cannot import dbt_paimon: call dbt_paimon.engine.runtime.deploy.ship(spark) once "
            "on this SparkSession (the engine's jobs and the dbt adapter do), or install dbt-paimon there")
    return ExecutorEnvironmentError(f"an executor's Python has no module {m.group(1)!r}. "
                                    f"{how_to_fix(EXECUTOR_MODULES)}")
