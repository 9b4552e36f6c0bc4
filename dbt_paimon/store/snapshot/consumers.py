"""Consumers: a reader's position, `<table>/consumer/consumer-<id>` holding `{"nextSnapshot": N}`, the
snapshot it reads next, which snapshot expiration keeps (Paimon's ConsumerManager)."""

from __future__ import annotations

import json

from ..common.branch import branch_root
from ..common.errors import CorruptTableError, PaimonError
from ..common.fileio import FileIO

PREFIX = "consumer-"


def _folder(table_path: str, branch: str | None) -> str:
    return f"{branch_root(table_path, branch)}/consumer"


def consumers(io: FileIO, table_path: str, branch: str | None = None) -> dict[str, int]:
    """consumer id -> the snapshot it reads next, of every consumer of the table (of `branch`)."""
    folder = _folder(table_path, branch)
    found = {}
    for name in sorted(io.list_names(folder)):
        if not name.startswith(PREFIX):
            continue
        try:
            found[name[len(PREFIX):]] = int(json.loads(io.read_text(f"{folder}/{name}"))["nextSnapshot"])
        except FileNotFoundError:  # removed meanwhile
            continue
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptTableError(f"consumer file {folder}/{name} is unreadable: {e}") from None
    return found


def check_id(consumer_id: str) -> str:
    """A consumer id as one file name inside the table's consumer folder (no path can be built from it)."""
    text = str(consumer_id)
    if not text or not all(c.isalnum() or c in "-_." for c in text) or text.startswith("."):
        raise PaimonError(f"consumer-id {consumer_id!r} must be letters, digits, '-', '_' and '.' "
                          f"(not starting with '.'): it names a file of the table")
    return text


def reset_consumer(io: FileIO, table_path: str, consumer_id: str, next_snapshot: int,
                   branch: str | None = None) -> None:
    """Record that `consumer_id` reads `next_snapshot` next (Paimon's ConsumerManager.resetConsumer):
    the file is replaced atomically, so a reader sees the old position or the new one."""
    folder = _folder(table_path, branch)
    io.mkdirs(folder)
    io.overwrite_text(f"{folder}/{PREFIX}{check_id(consumer_id)}", json.dumps({"nextSnapshot": int(next_snapshot)}))
