"""One writer at a time per Spark-native relation, and no reader while it writes, across the dbt
processes of this machine.

A Spark table's files live in one directory that a rebuild deletes and rewrites (dbt-spark's
`table` materialization drops it, then writes it anew; a seed drops, creates and inserts): two
processes doing that at once would mix or lose each other's files, and a process reading the table
meanwhile would find its files gone. So a connection that writes a relation takes an exclusive
lock on `<spark_dir>/locks/<schema>/<name>.lock`, and one that reads a Spark table takes a shared
one (flock: released by the kernel when the process ends, however it ends). A connection keeps its
locks until dbt releases it, i.e. for the whole model, seed, test or hook: a model's rows may be
read long after the statement that named its inputs. Another process that needs the relation the
other way waits, saying so once, up to the profile's `lock_timeout` seconds, then fails with one
sentence naming the relation and who holds it. Paimon tables need no lock: their commits are
atomic (snapshot files created once), a conflicting commit is retried, and a reader reads one
snapshot.

A connection holding a shared lock that comes to write the relation gives it up while it waits for
the exclusive one (flock converts that way), so two processes doing the same never deadlock.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import threading
import time
from typing import Callable, Optional

from dbt_common.exceptions import DbtRuntimeError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock; writes are not serialised there
    fcntl = None  # type: ignore[assignment]

_POLL_SECONDS = 0.2


def safe_name(name: str) -> str:
    """A schema or relation name as one file name: as is when it is a plain name (Spark's catalog
    takes no other), else hex, so that a name in a statement Spark will refuse anyway (`../x`) never
    reaches outside the directory."""
    if re.fullmatch(r"[\w$-]+", name) and not name.startswith("."):
        return name
    return "~" + name.encode().hex()


def name_of(file_name: str) -> str:
    """The name safe_name() made a file name of."""
    if file_name.startswith("~"):
        try:
            return bytes.fromhex(file_name[1:]).decode()
        except ValueError:
            pass
    return file_name


def lock_path(root: str, schema: str, name: str) -> str:
    return os.path.join(root, safe_name(schema), f"{safe_name(name)}.lock")


def _holder_info() -> dict:
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    if program == "__main__.py":  # python -m <package>
        program = os.path.basename(os.path.dirname(sys.argv[0]))
    command = " ".join([program, *sys.argv[1:3]])
    return {"pid": os.getpid(), "host": socket.gethostname(), "command": command,
            "since": time.strftime("%H:%M:%S")}


def describe_holder(path: str) -> str:
    """Who holds a lock, as its holder wrote it: `pid 4242 on vm (dbt run, since 23:41:07)`."""
    try:
        with open(path) as f:
            info = json.loads(f.read() or "{}")
    except (OSError, ValueError):
        info = {}
    if not info.get("pid"):
        return "another process"
    return f"pid {info['pid']} on {info.get('host', '?')} ({info.get('command', '?')}, since {info.get('since', '?')})"


def _written(path: str) -> bool:
    """Whether a writer (not only readers) holds the lock: a shared lock is refused only to a writer."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # flock locks belong to their open file: this one's goes, the caller's stays


class RelationLock:
    """A lock on one relation, held by one connection: shared (reading) or exclusive (writing)."""

    def __init__(self, path: str, what: str):
        self.path = path
        self.what = what
        self.exclusive = False
        self._fd: Optional[int] = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, exclusive: bool, timeout: float, on_wait: Callable[[str], None]) -> None:
        if fcntl is None or (self._fd is not None and (self.exclusive or not exclusive)):
            return
        if self._fd is None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        else:
            fd = self._fd  # shared -> exclusive: flock drops the shared lock while it waits
        deadline = time.monotonic() + max(timeout, 0)
        waited = False
        try:
            while True:
                try:
                    fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    who = (f"being written by another dbt process, {describe_holder(self.path)}"
                           if not exclusive or _written(self.path) else "being read by another dbt process")
                    if time.monotonic() >= deadline:
                        raise DbtRuntimeError(
                            f"{self.what} is {who}; gave up after {timeout:g} s (the profile's lock_timeout): "
                            f"run again when that process is done") from None
                    if not waited:
                        on_wait(f"{self.what} is {who}; waiting for it (up to {timeout:g} s, the profile's "
                                f"lock_timeout)")
                        waited = True
                    time.sleep(_POLL_SECONDS)
            if exclusive:  # who holds it, for whoever waits (readers leave the writer's words alone)
                info = json.dumps(_holder_info()).encode()
                os.ftruncate(fd, 0)
                os.pwrite(fd, info, 0)
        except BaseException:
            self._fd = None
            os.close(fd)
            raise
        self._fd = fd
        self.exclusive = exclusive

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


class HeldLocks:
    """The locks one dbt connection holds; released together when dbt releases the connection."""

    def __init__(self) -> None:
        self._locks: dict[str, RelationLock] = {}
        self._mutex = threading.Lock()

    def acquire(self, path: str, what: str, exclusive: bool, timeout: float, on_wait: Callable[[str], None]) -> None:
        with self._mutex:
            lock = self._locks.get(path)
            if lock is None:
                lock = self._locks[path] = RelationLock(path, what)
        try:
            lock.acquire(exclusive, timeout, on_wait)
        finally:
            if not lock.held:
                with self._mutex:
                    self._locks.pop(path, None)

    def release_all(self) -> None:
        with self._mutex:
            locks, self._locks = list(self._locks.values()), {}
        for lock in locks:
            lock.release()
