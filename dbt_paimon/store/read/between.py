"""What an incremental read reads, from Paimon's own options (as its AbstractDataTableScan chooses):

- `incremental-between = 'S,E'`:
  - two tag names: the `diff` of the tags' snapshots (tags keep their snapshot after it expired);
    with `incremental-between-tag-to-snapshot = true`, the records the snapshots between the tags'
    wrote, in the scan mode;
  - else two snapshot ids (start exclusive), in `incremental-between-scan-mode` (auto, delta,
    changelog: incremental.py; diff: diff.py);
- `incremental-between-timestamp = 'T1,T2'` (epoch milliseconds, or 'yyyy-MM-dd HH:mm:ss[.SSS]' in
  the local time zone, as Java parses it): the snapshots committed after T1 up to T2 (each end the
  last snapshot at or before it), in the scan mode; nothing when the range misses every snapshot.
Ends that are the same snapshot read nothing; an end before the start is an error, as in Paimon.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from ..common.errors import PaimonError
from ..common.fileio import FileIO
from ..manifest.manifest import ManifestEntry
from ..schema.schema import TableSchema
from ..snapshot.snapshot import Snapshot, SnapshotManager
from ..snapshot.tags import TagManager
from . import incremental
from .diff import DiffSplit, plan_diff, read_diff

BETWEEN = "incremental-between"
BETWEEN_TIMESTAMP = "incremental-between-timestamp"
SCAN_MODE = "incremental-between-scan-mode"
TAG_TO_SNAPSHOT = "incremental-between-tag-to-snapshot"
# ours, not Paimon's: a diff of the two snapshots' rows, not of the files they do not share (diff.py)
WHOLE_DIFF = "dbt-paimon.diff-of-rows"


@dataclass
class Between:
    """A planned incremental read: records of files (delta, changelog) or buckets to diff."""
    diff: bool = False
    records: list[tuple[int, ManifestEntry]] = field(default_factory=list)
    buckets: list[DiffSplit] = field(default_factory=list)

    @property
    def units(self) -> list:
        return self.buckets if self.diff else self.records


def row_count(planned: Between) -> int:
    """The rows a planned read reads at most (file metadata)."""
    if not planned.diff:
        return sum(e.file.row_count for _, e in planned.records)
    return sum(side.row_count for b in planned.buckets for side in (b.before, b.after) if side is not None)


def given(options: Mapping[str, str]) -> bool:
    return bool(options.get(BETWEEN) or options.get(BETWEEN_TIMESTAMP))


def plan(io: FileIO, table_path: str, schema: TableSchema, options: Mapping[str, str]) -> Between:
    """The files or buckets the options' incremental read reads (manifests only)."""
    if options.get(BETWEEN) and options.get(BETWEEN_TIMESTAMP):
        raise PaimonError(f"give either {BETWEEN} or {BETWEEN_TIMESTAMP}, not both")
    mode = str(options.get(SCAN_MODE) or "auto").lower()
    whole = str(options.get(WHOLE_DIFF, "false")).lower() == "true"
    snapshots = SnapshotManager(io, table_path, schema.branch)
    if options.get(BETWEEN):
        first, second = _two(BETWEEN, options[BETWEEN])
        tags = TagManager(io, table_path, schema.branch)
        start_tag, end_tag = _tag(tags, first), _tag(tags, second)
        if start_tag is not None and end_tag is not None:
            start, end = start_tag.snapshot, end_tag.snapshot
            if end.id < start.id:
                raise PaimonError(f"{BETWEEN} {options[BETWEEN]!r}: tag {second!r} (snapshot {end.id}) is before "
                                  f"tag {first!r} (snapshot {start.id})")
            if str(options.get(TAG_TO_SNAPSHOT, "false")).lower() == "true":
                return _records(io, table_path, schema, start.id, end.id, mode)
            return Between(diff=True) if start.id == end.id else _diff(io, table_path, schema, start, end, whole)
        if not (first.isdigit() and second.isdigit()):
            raise PaimonError(f"{BETWEEN} {options[BETWEEN]!r}: found no two tags of these names, and they are not "
                              f"two snapshot ids; give two tags or two snapshot ids")
        start_id, end_id = int(first), int(second)
        if end_id < start_id:
            raise PaimonError(f"{BETWEEN} {options[BETWEEN]!r}: the end snapshot is before the start")
        if snapshots.latest_id() is None or start_id == end_id:
            return Between(diff=mode == "diff")
        if mode == "diff":
            return _diff(io, table_path, schema, _snapshot(snapshots, start_id), _snapshot(snapshots, end_id), whole)
        return _records(io, table_path, schema, start_id, end_id, mode)
    low, high = (_millis(v) for v in _two(BETWEEN_TIMESTAMP, options[BETWEEN_TIMESTAMP]))
    if high < low:
        raise PaimonError(f"{BETWEEN_TIMESTAMP} {options[BETWEEN_TIMESTAMP]!r}: the end is before the start")
    earliest, latest = snapshots.earliest_id(), snapshots.latest_id()
    if latest is None:
        return Between(diff=mode == "diff")
    first_snap, last_snap = snapshots.snapshot(earliest), snapshots.snapshot(latest)
    if low == high or low > last_snap.time_millis or high < first_snap.time_millis:
        return Between(diff=mode == "diff")
    start, end = snapshots.at_or_before(low), snapshots.at_or_before(high)
    end = end or last_snap
    if mode == "diff":
        # no snapshot at or before the start: from the first snapshot when it is still there (the
        # whole table at the end), else from the earliest there is (Paimon's betweenTimestamps)
        if start is None and first_snap.id != 1:
            start = first_snap
        return _diff(io, table_path, schema, start, end, whole)
    start_id = earliest - 1 if start is None or first_snap.time_millis > low else start.id
    return _records(io, table_path, schema, start_id, end.id, mode)


def _records(io: FileIO, table_path: str, schema: TableSchema, start: int, end: int, mode: str) -> Between:
    if mode == "diff":
        raise PaimonError(f"{TAG_TO_SNAPSHOT} reads records: give {SCAN_MODE} auto, delta or changelog")
    if start == end:
        return Between()
    return Between(records=incremental.plan_between(io, table_path, schema, start, end, mode))


def _diff(io: FileIO, table_path: str, schema: TableSchema, start: Snapshot | None, end: Snapshot,
          whole: bool) -> Between:
    return Between(diff=True, buckets=plan_diff(io, table_path, schema, start, end, whole))


def _two(option: str, value: str) -> tuple[str, str]:
    parts = [p.strip() for p in str(value).split(",")]
    if len(parts) != 2 or not all(parts):
        raise PaimonError(f"{option} must be 'start,end' (the start exclusive), got {value!r}")
    return parts[0], parts[1]


def _tag(tags: TagManager, name: str):
    try:
        return tags.get(name)
    except PaimonError:  # not a name a tag can have (a snapshot id, say)
        return None


def _snapshot(snapshots: SnapshotManager, snapshot_id: int) -> Snapshot:
    found = snapshots.try_snapshot(snapshot_id)
    if found is None:
        earliest, latest = snapshots.earliest_id(), snapshots.latest_id()
        raise PaimonError(f"{BETWEEN}: snapshot {snapshot_id} is not there (the table has snapshots "
                          f"{earliest}..{latest}); a diff reads both ends")
    return found


def _millis(value: str) -> int:
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        return int(dt.datetime.fromisoformat(value).timestamp() * 1000)  # naive: the local zone, as Java's default
    except ValueError:
        raise PaimonError(f"{BETWEEN_TIMESTAMP} takes epoch milliseconds or 'yyyy-MM-dd HH:mm:ss', "
                          f"got {value!r}") from None


def read_units(io: FileIO, table_path: str, schema: TableSchema, planned: Between, units: list,
               projection=None, kinds: bool = True, order: bool = False) -> pa.Table:
    """Some units of a planned read (all of them, or one task's share) as Arrow: `rowkind` first.
    kinds=False: the inserted and updated rows only (+I/+U), without the row kind (a plain read)."""
    if planned.diff:
        if order:
            raise PaimonError("a diff has no record order: folding reads the records in delta or changelog mode")
        rows = read_diff(io, table_path, schema, units, projection, keep_deletes=kinds)
    else:
        rows = incremental.read_entries(io, table_path, schema, units, projection, order)
    if kinds:
        return rows
    added = rows.filter(pc.is_in(rows.column(incremental.ROW_KIND), pa.array(["+I", "+U"])))
    return added.drop_columns([incremental.ROW_KIND])
