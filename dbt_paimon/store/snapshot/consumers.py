"""Consumers: a reader's position, `<table>/consumer/consumer-<id>` holding `{"nextSnapshot": N}`, the
snapshot it reads next, which snapshot expiration keeps (Paimon's ConsumerManager)."""

from __future__ import annotations

import json

from ..common.errors import CorruptTableError
from ..common.fileio import FileIO

PREFIX = "consumer-"


def consumers(io: FileIO, table_path: str) -> dict[str, int]:
    """consumer id -> the snapshot it reads next, of every consumer of the table."""
    folder = f"{table_path.rstrip('/')}/consumer"
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
