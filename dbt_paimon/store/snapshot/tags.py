"""Tags: named snapshots that outlive snapshot expiration, stored as Paimon stores them.

A tag is the file `<table>/tag/tag-<name>` holding the tagged snapshot's JSON. A tag created with a
retention time also carries `tagCreateTime` (Java LocalDateTime in the writer's local time zone,
written by Jackson as the array `[year, month, day, hour, minute, second, nanoOfSecond]` with trailing
zero components left out) and `tagTimeRetained` (Java Duration as decimal seconds, e.g.
`3600.000000000`). Without a retention neither field is written, so that old readers (Paimon <= 0.7)
can still read the tag (Paimon's TagManager.createOrReplaceTag).

Expiration never deletes a file a tag references (expire.py); deleting a tag whose snapshot has
already expired deletes the files only that tag still held (Paimon's TagManager.deleteTag), through
the maintenance's FileDeletion its caller gives (tags stand below the maintenance that cleans up).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Optional, Protocol, Sequence

from ..common.branch import branch_root, normalize
from ..common.errors import CorruptTableError, PaimonError
from ..common.fileio import FileIO
from .snapshot import Snapshot, SnapshotManager


class TagCleaner(Protocol):
    """What deleting a tag needs of the maintenance (maintenance/file_deletion.py FileDeletion): the
    files only the tag's snapshot still held, deleted."""

    def clean_tag(self, tagged: Snapshot, tagged_snapshots: Sequence[Snapshot], earliest: Optional[Snapshot]) -> None:
        ...

TAG_DIR = "tag"
TAG_PREFIX = "tag-"
TAG_CREATE_TIME = "tagCreateTime"
TAG_TIME_RETAINED = "tagTimeRetained"


@dataclass(frozen=True)
class Tag:
    name: str
    snapshot: Snapshot
    create_time: dt.datetime | None = None  # naive, local time (Java LocalDateTime)
    time_retained: dt.timedelta | None = None

    @property
    def snapshot_id(self) -> int:
        return self.snapshot.id

    def expired(self, now: dt.datetime) -> bool:
        """Past its retention (Paimon's TagTimeExpire: now is after createTime + timeRetained)."""
        return (self.create_time is not None and self.time_retained is not None
                and now > self.create_time + self.time_retained)


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise PaimonError("Tag name shouldn't be blank.")
    # Paimon only refuses blank names; a name that is not a plain file name would land elsewhere
    # (or be hidden from listings), so it is refused here.
    if "/" in name or "\\" in name or name.startswith(".") or name != name.strip():
        raise PaimonError(f"tag name {name!r} must be a plain file name (no '/', no leading '.' or spaces)")
    return name


# ---- Jackson's JavaTimeModule encodings -------------------------------------------------------------

def encode_local_datetime(value: dt.datetime) -> list[int]:
    """LocalDateTime as Jackson writes it: second left out when second and nanos are 0, nanos when 0."""
    out = [value.year, value.month, value.day, value.hour, value.minute]
    nanos = value.microsecond * 1000
    if value.second or nanos:
        out.append(value.second)
        if nanos:
            out.append(nanos)
    return out


def decode_local_datetime(value, where: str) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, list) and 3 <= len(value) <= 7 and all(isinstance(v, int) for v in value):
        y, mo, d, h, mi, s, ns = (list(value) + [0] * 7)[:7]
        return dt.datetime(y, mo, d, h, mi, s, ns // 1000)
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value[:26])
        except ValueError:
            pass
    raise CorruptTableError(f"{where}: {TAG_CREATE_TIME} {value!r} is not a Java LocalDateTime")


def encode_duration(value: dt.timedelta) -> str:
    """Duration as Jackson writes it: decimal seconds with 9 fraction digits ('3600.000000000')."""
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    if micros < 0:
        raise PaimonError(f"a tag's time retained must not be negative, got {value}")
    seconds, rest = divmod(micros, 1_000_000)
    return f"{seconds}.{rest * 1000:09d}"


_ISO_DURATION = re.compile(r"^PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?$")


def decode_duration(value, where: str) -> dt.timedelta | None:
    if value is None:
        return None
    if isinstance(value, (int, Decimal, float)) and not isinstance(value, bool):
        d = Decimal(str(value))
        return dt.timedelta(seconds=int(d), microseconds=int((d - int(d)) * 1_000_000))
    if isinstance(value, str):
        m = _ISO_DURATION.match(value)
        if m and any(m.groups()):
            h, mi, s = m.groups()
            return dt.timedelta(hours=int(h or 0), minutes=int(mi or 0), seconds=float(s or 0))
    raise CorruptTableError(f"{where}: {TAG_TIME_RETAINED} {value!r} is not a Java Duration")


def tag_json(snapshot_json: str, create_time: dt.datetime | None, time_retained: dt.timedelta | None) -> str:
    """The tag file text for a snapshot's JSON: the snapshot as it is, plus the two tag fields when
    a retention is given (Paimon's Tag.fromSnapshotAndTagTtl)."""
    if time_retained is None:
        return snapshot_json
    fields = json.loads(snapshot_json)
    for key in (TAG_CREATE_TIME, TAG_TIME_RETAINED):
        fields.pop(key, None)
    body = json.dumps(fields, indent=2)
    assert body.endswith("\n}")
    created = json.dumps(encode_local_datetime(create_time or dt.datetime.now()))
    return (f"{body[:-2]},\n  \"{TAG_CREATE_TIME}\": {created},\n"
            f"  \"{TAG_TIME_RETAINED}\": {encode_duration(time_retained)}\n}}")


def snapshot_json_of_tag(tag_text: str) -> str:
    """A tag's JSON trimmed back to a snapshot (Tag.trimToSnapshot), for re-creating a snapshot file."""
    fields = json.loads(tag_text)
    if TAG_CREATE_TIME not in fields and TAG_TIME_RETAINED not in fields:
        return tag_text
    fields.pop(TAG_CREATE_TIME, None)
    fields.pop(TAG_TIME_RETAINED, None)
    return json.dumps(fields, indent=2)


class TagManager:
    """Lists, reads, creates and deletes the tags of one table (Paimon's utils.TagManager)."""

    def __init__(self, io: FileIO, table_path: str, branch: str | None = None):
        self.io = io
        self.table_path = table_path.rstrip("/")
        self.branch = normalize(branch)
        self.dir = f"{branch_root(self.table_path, self.branch)}/{TAG_DIR}"

    def path(self, name: str) -> str:
        return f"{self.dir}/{TAG_PREFIX}{name}"

    def names(self) -> list[str]:
        return sorted(n[len(TAG_PREFIX):] for n in self.io.list_names(self.dir)
                      if n.startswith(TAG_PREFIX) and len(n) > len(TAG_PREFIX))

    def exists(self, name: str) -> bool:
        return self.io.exists(self.path(_check_name(name)))

    def read_text(self, name: str) -> str | None:
        try:
            return self.io.read_text(self.path(name))
        except FileNotFoundError:
            return None

    @staticmethod
    def parse(name: str, text: str, where: str) -> Tag:
        snapshot = Snapshot.from_json(text, where)
        fields = json.loads(text, parse_float=Decimal)
        return Tag(name, snapshot, decode_local_datetime(fields.get(TAG_CREATE_TIME), where),
                   decode_duration(fields.get(TAG_TIME_RETAINED), where))

    def get(self, name: str) -> Tag | None:
        """The tag, or None when there is no such tag."""
        text = self.read_text(_check_name(name))
        return None if text is None else self.parse(name, text, self.path(name))

    def get_or_throw(self, name: str) -> Tag:
        tag = self.get(name)
        if tag is None:
            raise PaimonError(f"Tag '{name}' doesn't exist.")
        return tag

    def tags(self) -> list[Tag]:
        """Every tag, by snapshot id then name (a tag deleted while listing is skipped, as in Paimon)."""
        out = []
        for name in self.names():
            text = self.read_text(name)
            if text is not None:
                out.append(self.parse(name, text, self.path(name)))
        return sorted(out, key=lambda t: (t.snapshot.id, t.name))

    def tagged_snapshots(self) -> list[Snapshot]:
        """The tagged snapshots, one per snapshot id, by id (TagManager.taggedSnapshots)."""
        by_id: dict[int, Snapshot] = {}
        for t in self.tags():
            by_id.setdefault(t.snapshot.id, t.snapshot)
        return [by_id[i] for i in sorted(by_id)]

    def create(self, name: str, snapshot_id: int | None = None, time_retained: dt.timedelta | None = None,
               ignore_if_exists: bool = False, now: dt.datetime | None = None) -> Tag:
        """Tag a snapshot (default: the latest). A snapshot already expired can still be tagged when
        another tag holds it (AbstractFileStoreTable.findSnapshot)."""
        _check_name(name)
        if self.io.exists(self.path(name)):
            if ignore_if_exists:
                return self.get_or_throw(name)
            raise PaimonError(f"Tag '{name}' already exists.")
        snapshots = SnapshotManager(self.io, self.table_path, self.branch)
        if snapshot_id is None:
            latest = snapshots.latest_id()
            if latest is None:
                raise PaimonError("Cannot create tag because latest snapshot doesn't exist.")
            snapshot_id = latest
        text = None
        try:
            text = self.io.read_text(snapshots.path(int(snapshot_id)))
        except FileNotFoundError:
            for other in self.names():
                other_text = self.read_text(other)
                if other_text is not None and Snapshot.from_json(other_text, self.path(other)).id == snapshot_id:
                    text = snapshot_json_of_tag(other_text)
                    break
        if text is None:
            raise PaimonError(f"Cannot create tag because given snapshot #{snapshot_id} doesn't exist.")
        Snapshot.from_json(text, f"snapshot {snapshot_id}")  # refuse to tag a damaged snapshot
        created = (now or dt.datetime.now()) if time_retained is not None else None
        content = tag_json(text, created, time_retained)
        # Created only if absent: two writers tagging the same name cannot overwrite each other.
        if not self.io.write_exclusive(self.path(name), content):
            if ignore_if_exists:
                return self.get_or_throw(name)
            raise PaimonError(f"Tag '{name}' already exists.")
        return self.parse(name, content, self.path(name))

    def delete(self, name: str, deletion: TagCleaner) -> bool:
        """Delete a tag; False when it does not exist (Paimon only warns).

        When the tagged snapshot has already expired and no other tag holds it, the data files,
        manifests and index files only this tag still referenced are deleted too, after the tag
        file (Paimon's TagManager.deleteTag / doClean), by `deletion` (a FileDeletion of the table: its
        hook sees each file deletion)."""
        _check_name(name)
        text = self.read_text(name)
        if text is None:
            return False
        tag = self.parse(name, text, self.path(name))
        snapshots = SnapshotManager(self.io, self.table_path, self.branch)
        if snapshots.exists(tag.snapshot.id):
            self.io.delete(self.path(name))
            return True
        # read every tag before the file goes: the neighbours decide what must stay
        all_tags = self.tags()
        self.io.delete(self.path(name))
        if sum(1 for t in all_tags if t.snapshot.id == tag.snapshot.id) > 1:
            return True
        tagged: list[Snapshot] = []
        for t in all_tags:
            if not tagged or tagged[-1].id != t.snapshot.id:
                tagged.append(t.snapshot)
        earliest = snapshots.earliest_id()
        deletion.clean_tag(tag.snapshot, tagged, snapshots.try_snapshot(earliest) if earliest else None)
        return True
