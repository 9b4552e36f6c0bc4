"""The JVM class-data archive cache stays bounded (adapter/jvm_cache.py): every new venv, Java or Spark makes
another ~160 MB archive, and a fresh clone per CI run once filled the disk with them."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from dbt_paimon.adapter import jvm_cache


def _touch(path, age_seconds: float) -> str:
    with open(path, "wb") as f:
        f.write(b"x")
    then = time.time() - age_seconds
    os.utime(path, (then, then))
    return str(path)


def test_only_the_most_recently_used_archives_and_live_dumps_are_kept(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    archives = [_touch(tmp_path / f"spark-{i:016x}.jsa", age_seconds=100 * i) for i in range(6)]
    keep = archives[5]  # the one in use now, however old
    dead_dump = _touch(tmp_path / f"spark-{1:016x}.jsa.{dead}.tmp", age_seconds=3600)
    live_dump = _touch(tmp_path / f"spark-{2:016x}.jsa.{os.getpid()}.tmp", age_seconds=3600)
    own_dump = _touch(tmp_path / f"spark-{5:016x}.jsa.{dead}.tmp", age_seconds=3600)
    jvm_cache.forget_stale(str(tmp_path), keep)
    left = sorted(os.listdir(tmp_path))
    # the three most recently used (0, 1, 2) and the one in use; 3 and 4 go
    assert left == sorted([os.path.basename(p) for p in archives[:3] + [keep]]
                          + [os.path.basename(live_dump), os.path.basename(own_dump)])
    assert not os.path.exists(dead_dump)
