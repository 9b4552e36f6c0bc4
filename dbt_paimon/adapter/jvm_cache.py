"""Spark's JVM classes from a class data sharing (CDS) archive, so that a dbt command's JVM starts
seconds sooner.

A dbt command's Spark JVM loads and verifies some 20,000 classes (Spark SQL's analyzer, optimizer
and code generator, the Python data source path) before the first model runs: on 2 cores that is
the largest single part of a dbt command's fixed cost. Java 13+ can write the classes a JVM loaded
to an archive when it exits (-XX:ArchiveClassesAtExit) and map them from it at the next start
(-XX:SharedArchiveFile), already parsed and verified. `dbt run` of one model: 8.1-8.9 s without,
6.1-6.4 s with (BENCHMARKS.md, "dbt start-up").

The archive belongs to one Java and one set of Spark jars (the JVM refuses a stale one and runs
without it), so its name carries a digest of both: `<cache>/spark-<digest>.jsa`, ~160 MB, in
`$XDG_CACHE_HOME/dbt-paimon/jvm` (default `~/.cache/dbt-paimon/jvm`), or the directory named by
DBT_PAIMON_JVM_CACHE (`0` turns all of this off). The first dbt command without an archive has its
JVM write one as `<archive>.<pid>.tmp` when it exits (after dbt is done); a later command renames
it into place once nothing writes it any more. A JVM that says it cannot use an archive (truncated,
another Java build) makes the next command write a new one. Each new venv, Java or Spark makes
another archive, so writing one makes the cache forget all but the MAX_ARCHIVES most recently used
and the dumps no JVM is finishing (`forget_stale`).
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import time
from typing import Optional

CACHE_ENV = "DBT_PAIMON_JVM_CACHE"
# A dump left this long untouched is done (or dead: the JVM checks the archive it is given)
_SETTLED_SECONDS = 20
_STALE_DAYS = 30
MAX_ARCHIVES = 3  # archives kept at most (another Java, Spark or venv each makes one)
# Settings that change the JVM's class path, which the archive records
_CLASS_PATH_SETTINGS = ("spark.driver.extraClassPath", "spark.jars", "spark.jars.packages",
                        "spark.driver.userClassPathFirst")
# What a JVM says when it cannot map an archive (not what one says while writing one at exit, which
# may be in the same log file from another process)
_REFUSED = re.compile(r"Unable to use shared archive|error has occurred while processing the shared archive|"
                      r"shared class paths mismatch|archive file has been truncated|"
                      r"archive file was created by a different", re.IGNORECASE)


def cache_dir() -> Optional[str]:
    value = os.environ.get(CACHE_ENV, "")
    if value.lower() in ("0", "off", "false", "no"):
        return None
    if value:
        return os.path.abspath(os.path.expanduser(value))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "dbt-paimon", "jvm")


def _java() -> Optional[str]:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.exists(java) else None


def _digest(settings: dict[str, str]) -> Optional[str]:
    """What the archive depends on: the java binary, Spark's jars, the class path settings."""
    try:
        from pyspark.find_spark_home import _find_spark_home

        jars = os.path.join(_find_spark_home(), "jars")
        names = sorted(os.listdir(jars))
    except Exception:  # noqa: BLE001 - no Spark home to read: no archive
        return None
    java = _java()
    if java is None:
        return None
    h = hashlib.sha1()
    st = os.stat(java)
    h.update(f"{java}|{st.st_size}|{st.st_mtime_ns}".encode())
    for name in names:
        st = os.stat(os.path.join(jars, name))
        h.update(f"{name}|{st.st_size}|{st.st_mtime_ns}".encode())
    for key in _CLASS_PATH_SETTINGS:
        h.update(f"{key}={settings.get(key, '')}".encode())
    return h.hexdigest()[:16]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _adopt(archive: str) -> None:
    """Rename a finished dump into place; delete other, dead ones."""
    for tmp in sorted(glob.glob(glob.escape(archive) + ".*.tmp")):
        try:
            pid = int(tmp.rsplit(".", 2)[-2])
            settled = time.time() - os.stat(tmp).st_mtime > _SETTLED_SECONDS
        except (ValueError, OSError):
            continue
        if _alive(pid) or not settled:
            continue
        if not os.path.exists(archive):
            try:
                os.replace(tmp, archive)
                continue
            except OSError:
                pass
        try:
            os.remove(tmp)
        except OSError:
            pass


def _dump_under_way(archive: str) -> bool:
    for tmp in glob.glob(glob.escape(archive) + ".*.tmp"):
        try:
            if time.time() - os.stat(tmp).st_mtime < 600:
                return True
        except OSError:
            continue
    return False


def forget_stale(directory: str, keep: str) -> None:
    """Bound the cache (the archives are ~160 MB each, and every new venv or Spark makes another):
    the MAX_ARCHIVES most recently used archives stay, and no other unused for a month; a dump of
    another archive whose JVM is gone goes, since nothing will adopt it."""
    archives = []
    for path in glob.glob(os.path.join(glob.escape(directory), "spark-*.jsa")):
        try:
            archives.append((os.stat(path).st_mtime, path))
        except OSError:
            continue
    archives.sort(reverse=True)
    for rank, (mtime, path) in enumerate(archives):
        if path != keep and (rank >= MAX_ARCHIVES or time.time() - mtime > _STALE_DAYS * 86400):
            _remove(path)
    for tmp in glob.glob(os.path.join(glob.escape(directory), "spark-*.jsa.*.tmp")):
        if tmp.startswith(keep + "."):
            continue  # this archive's own dumps: _adopt decides
        try:
            pid = int(tmp.rsplit(".", 2)[-2])
            settled = time.time() - os.stat(tmp).st_mtime > _SETTLED_SECONDS
        except (ValueError, OSError):
            continue
        if settled and not _alive(pid):
            _remove(tmp)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def java_options(settings: dict[str, str]) -> tuple[list[str], Optional[str]]:
    """The JVM options to start with (read the archive, or write it at exit), and the archive read."""
    given = settings.get("spark.driver.extraJavaOptions", "")
    if "SharedArchiveFile" in given or "ArchiveClassesAtExit" in given or "-Xshare" in given:
        return [], None  # the profile decides
    directory = cache_dir()
    digest = _digest(settings) if directory else None
    if directory is None or digest is None:
        return [], None
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        return [], None
    archive = os.path.join(directory, f"spark-{digest}.jsa")
    _adopt(archive)
    if os.path.exists(archive):
        try:
            os.utime(archive)  # in use: not stale
        except OSError:
            pass
        return [f"-XX:SharedArchiveFile={archive}"], archive
    forget_stale(directory, archive)
    if _dump_under_way(archive):
        return [], None
    return [f"-XX:ArchiveClassesAtExit={archive}.{os.getpid()}.tmp"], None


def check_used(archive: Optional[str], jvm_output: str) -> None:
    """After the JVM started: an archive it says it could not use is deleted (the next command
    writes a new one) rather than refused at every start."""
    if archive and _REFUSED.search(jvm_output or ""):
        try:
            os.remove(archive)
        except OSError:
            pass
