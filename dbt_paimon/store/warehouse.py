"""The warehouse layout of Paimon's filesystem catalog: `<warehouse>/<database>.db/<table>/`.

Database and table names come from users (a dbt relation, a run-operation's `relation` argument),
so every path built from one must land inside the warehouse: a name is one directory name, never
a path. A name is refused when it could name anything else (`..`, `/`, `\\`, a leading `.` that
would reach our own hidden staging directories or Spark's `.spark`), or when Paimon gives its
characters a meaning (`$` splits a table from its system table, `t$snapshots`). On a local
warehouse the result is also resolved through symbolic links, so a link inside the warehouse that
points outside it cannot carry a write or a delete out either.

Names are lower-cased, as Paimon's catalog and Spark's do.
"""

from __future__ import annotations

import os
import posixpath
import re

from .common.errors import InvalidNameError
from .common.fileio import local_path

DATABASE_SUFFIX = ".db"  # Paimon's Catalog.DB_SUFFIX
SYSTEM_TABLE_SPLITTER = "$"  # Paimon's Catalog.SYSTEM_TABLE_SPLITTER
_MAX_NAME_BYTES = 200  # a directory name (255 bytes on common filesystems) with room for ".db" and staging suffixes
_BAD_CHARACTERS = re.compile(r"[/\\\x00-\x1f\x7f" + re.escape(SYSTEM_TABLE_SPLITTER) + "]")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def check_name(kind: str, name: object) -> str:
    """The name, lower-cased, if it is one plain directory name; else an error saying why not."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidNameError(f"{kind} name {name!r} is empty: give a {kind} name")
    bad = _BAD_CHARACTERS.search(name)
    if bad:
        what = {"/": "'/'", "\\": "'\\'", SYSTEM_TABLE_SPLITTER: "'$' (Paimon's system-table separator)"}.get(
            bad.group(), "a control character")
        raise InvalidNameError(f"{kind} name {name!r} contains {what}: a {kind} name is one directory name "
                               f"inside the warehouse, never a path")
    if name.startswith("."):
        raise InvalidNameError(f"{kind} name {name!r} starts with '.': such names ('..', hidden files) are not "
                               f"{kind}s of the warehouse")
    if name != name.strip():
        raise InvalidNameError(f"{kind} name {name!r} starts or ends with white space")
    if len(name.encode("utf-8")) > _MAX_NAME_BYTES:
        raise InvalidNameError(f"{kind} name {name[:40]!r}... is longer than {_MAX_NAME_BYTES} bytes")
    return name.lower()


def is_uri(path: str) -> bool:
    return bool(_URI.match(path))


def _within(path: str, root: str) -> bool:
    return path.startswith(root.rstrip("/" + os.sep) + (os.sep if not is_uri(root) else "/"))


def contain(warehouse: str, path: str, what: str) -> str:
    """`path` if it lies strictly inside `warehouse` (symbolic links resolved on a local disk);
    else an error naming both. Returns `path` as given, not the resolved one."""
    if is_uri(warehouse):
        resolved = posixpath.normpath(path.split("://", 1)[1])
        inside = _within(resolved, posixpath.normpath(warehouse.split("://", 1)[1])) and \
            path.split("://", 1)[0] == warehouse.split("://", 1)[0]
    else:
        resolved = os.path.realpath(local_path(path))
        inside = _within(resolved, os.path.realpath(local_path(warehouse)))
    if not inside:
        raise InvalidNameError(f"{what} resolves to {resolved}, which is outside the warehouse {warehouse} "
                               f"(a '..' or a symbolic link pointing out of it); nothing was read or written")
    return path


def _join(warehouse: str, *names: str) -> str:
    return "/".join([warehouse.rstrip("/"), *names]) if is_uri(warehouse) else os.path.join(warehouse, *names)


def database_path(warehouse: str, database: str) -> str:
    """`<warehouse>/<database>.db`, checked."""
    db = check_name("database", database)
    return contain(warehouse, _join(warehouse, db + DATABASE_SUFFIX), f"database {database!r}")


def table_path(warehouse: str, database: str, table: str) -> str:
    """`<warehouse>/<database>.db/<table>`, checked (both names, and the resolved path)."""
    db = check_name("database", database)
    name = check_name("table", table)
    return contain(warehouse, _join(warehouse, db + DATABASE_SUFFIX, name), f"table {database}.{table}")
