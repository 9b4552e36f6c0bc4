"""Time travel: the snapshot, or tag, a batch read's options name, by Paimon's scan options.

- `scan.snapshot-id` (or `snapshot-id`): that snapshot;
- `scan.tag-name` (or `tag`): that tag's snapshot;
- `scan.version` (what Spark's `VERSION AS OF v` becomes in Paimon's connector): the tag named v if
  there is one, else the snapshot whose id v is;
- `scan.timestamp-millis`, `scan.timestamp` ('yyyy-MM-dd HH:mm:ss[.SSS]' in the local zone, as Java's
  default; `TIMESTAMP AS OF` gives the former): the last snapshot committed at or before then; an
  error when the earliest snapshot there is was committed later, as Paimon refuses it;
- `scan.mode`: `default`, `latest`, `latest-full`, `full` read the latest snapshot; `from-snapshot`,
  `from-snapshot-full` the snapshot or tag given, `from-timestamp` the time given (a batch read reads
  that snapshot's rows). Paimon's other modes (`compacted-full`, `incremental`, by file creation
  time) choose what this reader does not: refused, where ignoring them would read the latest rows.
At most one of the first five is given.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Mapping, Optional

from ..common.errors import PaimonError
from ..snapshot.snapshot import SnapshotManager
from ..snapshot.tags import TagManager

SNAPSHOT_IDS = ("snapshot-id", "scan.snapshot-id")
TAGS = ("tag", "scan.tag-name")
VERSION = "scan.version"
TIMESTAMPS = ("scan.timestamp-millis", "scan.timestamp")
MODE = "scan.mode"
OPTIONS = SNAPSHOT_IDS + TAGS + (VERSION,) + TIMESTAMPS + (MODE,)
_LATEST_MODES = ("default", "latest", "latest-full", "full")
_FROM = {"from-snapshot": SNAPSHOT_IDS + TAGS + (VERSION,), "from-snapshot-full": SNAPSHOT_IDS + TAGS + (VERSION,),
         "from-timestamp": TIMESTAMPS}


@dataclass(frozen=True)
class Travel:
    """Where a read goes: a snapshot id, or a tag (which holds its snapshot, expired or not), or
    neither (the latest)."""
    snapshot_id: Optional[int] = None
    tag: Optional[str] = None

    @property
    def travels(self) -> bool:
        return self.snapshot_id is not None or self.tag is not None


def _given(options: Mapping[str, str]) -> dict[str, str]:
    lowered = {str(k).lower(): v for k, v in options.items()}
    return {k: str(lowered[k]) for k in OPTIONS if lowered.get(k) not in (None, "")}


def given(options: Mapping[str, str]) -> bool:
    """Whether the options travel (anything but the latest snapshot)."""
    found = _given(options)
    return any(k != MODE for k in found)


def check(options: Mapping[str, str]) -> None:
    """Refuse a combination or mode the reader cannot follow, before any file is read."""
    found = _given(options)
    chosen = [k for k in found if k != MODE]
    if len(chosen) > 1:
        raise PaimonError(f"give one way to travel in time, not {' and '.join(repr(k) for k in chosen)}")
    mode = found.get(MODE, "default").lower()
    if mode in _LATEST_MODES:
        if chosen and mode != "default":
            raise PaimonError(f"scan.mode {mode!r} reads the latest snapshot; {chosen[0]!r} asks for another")
        return
    if mode not in _FROM:
        raise PaimonError(f"scan.mode {mode!r} is not supported: travel in time with 'scan.snapshot-id', "
                          f"'scan.tag-name' or 'scan.timestamp-millis', or read changes with 'incremental-between'")
    if not chosen or chosen[0] not in _FROM[mode]:
        raise PaimonError(f"scan.mode {mode!r} needs one of {', '.join(repr(k) for k in _FROM[mode])}")


def resolve(options: Mapping[str, str], snapshots: SnapshotManager, tags: TagManager) -> Travel:
    """The snapshot or tag the options name (see above)."""
    check(options)
    found = {k: v for k, v in _given(options).items() if k != MODE}
    if not found:
        return Travel()
    (key, value), = found.items()
    if key in TAGS:
        return Travel(tag=value)
    if key in SNAPSHOT_IDS:
        return Travel(snapshot_id=_snapshot_id(key, value))
    if key == VERSION:
        if tags.exists(value):  # a tag wins over a snapshot of that id, as in Paimon
            return Travel(tag=value)
        if not value.isdigit():
            raise PaimonError(f"version {value!r} is neither a tag of the table nor a snapshot id")
        return Travel(snapshot_id=int(value))
    millis = _millis(key, value)
    snapshot = snapshots.at_or_before(millis)
    if snapshot is None:
        earliest = snapshots.earliest_id()
        there = (f"the earliest snapshot's is {snapshots.snapshot(earliest).time_millis}" if earliest is not None
                 else "the table has no snapshot")
        raise PaimonError(f"no snapshot was committed at or before {millis} (epoch milliseconds, {key} "
                          f"{value!r}); {there}")
    return Travel(snapshot_id=snapshot.id)


def _snapshot_id(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise PaimonError(f"{key} {value!r} is not a snapshot id (a whole number)") from None


def _millis(key: str, value: str) -> int:
    if key == "scan.timestamp-millis":
        if not value.lstrip("-").isdigit():
            raise PaimonError(f"{key} takes epoch milliseconds, got {value!r}")
        return int(value)
    try:
        return int(dt.datetime.fromisoformat(value.strip()).timestamp() * 1000)  # naive: the local zone
    except ValueError:
        raise PaimonError(f"{key} takes 'yyyy-MM-dd HH:mm:ss', got {value!r}") from None
