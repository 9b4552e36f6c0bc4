"""A real Spark standalone cluster on this host (one master, N workers, each its own JVM) from the
pyspark wheel's `bin/spark-class`, and executor Pythons that have NOT got dbt_paimon.

Used by conftest.py (one cluster per test session) and the tests (run_child), and runnable by hand:

    python -m tests.cluster.standalone DIR     # prints the master URL, Ctrl-C stops it
"""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

import pyspark

SPARK_HOME = os.path.dirname(os.path.abspath(pyspark.__file__))
SITE_PACKAGES = os.path.dirname(SPARK_HOME)
# What an executor's Python needs to run our tasks: Spark's own Python side and the third-party
# wheels the engine imports. dbt_paimon is deliberately absent: it must arrive by deploy.ship().
EXECUTOR_MODULES = ("pyspark", "py4j", "pyarrow", "numpy", "fastavro", "backports", "obstore", "pyroaring")


@dataclass
class Cluster:
    master_url: str
    home: str
    procs: list[subprocess.Popen] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)

    def stop(self) -> None:
        """Stop every daemon (each in its own process group: the JVM and anything it started)."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    def log_tail(self, chars: int = 3000) -> str:
        out = []
        for path in self.logs:
            with open(path, errors="replace") as f:
                out.append(f"--- {path}\n{f.read()[-chars:]}")
        return "\n".join(out)


def _daemon_env(home: str) -> dict[str, str]:
    """The daemons' environment: nothing of the test process's Python setup leaks to executors
    (no PYTHONPATH, no PYSPARK_PYTHON: each application names its executors' Python)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYSPARK_", "SPARK_", "PYTHON")) and k != "VIRTUAL_ENV"}
    conf_dir = os.path.join(home, "conf")  # ours only: no spark-defaults.conf or spark-env.sh from elsewhere
    os.makedirs(conf_dir, exist_ok=True)
    with open(os.path.join(conf_dir, "spark-defaults.conf"), "w") as f:
        f.write("spark.master.rest.enabled false\n")  # its fixed port 6066 would clash between test runs
    env.update(SPARK_HOME=SPARK_HOME, SPARK_CONF_DIR=conf_dir, SPARK_LOCAL_IP="127.0.0.1",
               SPARK_DAEMON_MEMORY="256m", PATH=os.environ.get("PATH", "/usr/bin:/bin"))
    return env


def _die_with_parent() -> None:
    """In the daemon, before exec: SIGTERM when the process that started it dies (Linux), so a killed
    test run leaves no JVMs behind. Survives spark-class's exec of java."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _spawn(cluster: Cluster, name: str, args: list[str], env: dict[str, str]) -> str:
    log = os.path.join(cluster.home, f"{name}.log")
    with open(log, "wb") as out:
        proc = subprocess.Popen([os.path.join(SPARK_HOME, "bin", "spark-class"), *args], env=env,
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=_die_with_parent)
    cluster.procs.append(proc)
    cluster.logs.append(log)
    return log


def _wait_for(cluster: Cluster, log: str, pattern: str, count: int = 1, timeout: float = 90.0) -> list[str]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(log, errors="replace") as f:
            found = re.findall(pattern, f.read())
        if len(found) >= count:
            return found
        if any(p.poll() is not None for p in cluster.procs):
            break
        time.sleep(0.2)
    cluster.stop()
    raise RuntimeError(f"the standalone cluster did not come up ({pattern!r} x{count} in {log}):\n"
                       + cluster.log_tail())


def start(home: str, workers: int = 2, cores: int = 1, memory: str = "1g") -> Cluster:
    """Start a master and `workers` workers; returns once every worker registered with the master."""
    os.makedirs(home, exist_ok=True)
    env = _daemon_env(home)
    cluster = Cluster("", home)
    master_log = _spawn(cluster, "master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                            "--port", "0", "--webui-port", "0"], env)
    # --port 0: the master picks a free port and logs it
    [cluster.master_url] = _wait_for(cluster, master_log, r"Starting Spark master at (spark://[\d.]+:\d+)")
    for i in range(workers):
        work_dir = os.path.join(home, f"worker-{i}")
        os.makedirs(work_dir, exist_ok=True)
        _spawn(cluster, f"worker-{i}", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                        "--cores", str(cores), "--memory", memory, "--webui-port", "0",
                                        "--work-dir", work_dir, cluster.master_url], env)
    _wait_for(cluster, master_log, r"Registering worker", count=workers)
    return cluster


def executor_python(directory: str, modules: tuple[str, ...] = EXECUTOR_MODULES,
                    interpreter: str | None = None) -> str:
    """A Python for executors that can import only `modules` (symlinked from this venv) and the
    standard library: a wrapper script running the base interpreter with -S (no site-packages,
    neither the venv's nor the base installation's) and those modules on PYTHONPATH."""
    site = os.path.join(directory, "site-packages")
    os.makedirs(site, exist_ok=True)
    for entry in os.listdir(SITE_PACKAGES):
        # the package, its .libs (vendored shared libraries) and its dist-info (metadata lookups)
        base = re.split(r"[-.]", entry, maxsplit=1)[0]
        if base in modules and not os.path.lexists(os.path.join(site, entry)):
            os.symlink(os.path.join(SITE_PACKAGES, entry), os.path.join(site, entry))
    if interpreter is None:
        interpreter = os.path.join(sys.base_prefix, "bin", f"python{sys.version_info[0]}.{sys.version_info[1]}")
    wrapper = os.path.join(directory, "python")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\n"
                f'PYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{interpreter}" -S "$@"\n')
    os.chmod(wrapper, 0o755)
    return wrapper


def other_minor_python() -> str | None:
    """A CPython of another minor version than this one, if the machine has one (for the version
    mismatch a cluster must refuse): on PATH, or beside this one's installation (pyenv's layout)."""
    major, minor = sys.version_info[:2]
    for other in (minor + 1, minor - 1):
        name = f"python{major}.{other}"
        candidates = [name] + sorted(glob.glob(os.path.join(os.path.dirname(sys.base_prefix), "*", "bin", name)))
        for candidate in candidates:
            try:
                out = subprocess.run([candidate, "-c", "import sys; print(sys.executable)"],
                                     capture_output=True, text=True, timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                continue
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip()
    return None


def run_child(cluster, argv: list[str], cwd: str, python: str, report: str, timeout: float = 600) -> dict:
    """argv in a child process of this venv's Python, in cwd (not the repository: Python workers
    Spark starts on the driver would import dbt_paimon from their working directory), with no
    PYTHONPATH (Spark hands it on to those workers) and PYSPARK_PYTHON = the executors' Python."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    env["PYSPARK_PYTHON"] = python
    proc = subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    detail = proc.stdout[-4000:] + proc.stderr[-6000:]
    assert proc.returncode == 0, detail + "\n" + cluster.log_tail(1500)
    with open(report) as f:
        out = json.load(f)
    assert not out.get("failure"), out["failure"] + "\n" + detail
    return out


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # run the finally below
    c = start(sys.argv[1])
    print(c.master_url, flush=True)
    try:
        signal.pause()
    finally:
        c.stop()
