"""Snapshot (snapshot/snapshot-N JSON) and SnapshotManager (ids, LATEST/EARLIEST hints)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from ..common.branch import branch_root, normalize
from ..common.errors import CorruptTableError, PaimonError
from ..common.fileio import FileIO

BATCH_COMMIT_IDENTIFIER = 2**63 - 1
APPEND, COMPACT, OVERWRITE = "APPEND", "COMPACT", "OVERWRITE"


@dataclass(frozen=True)
class Snapshot:
    id: int
    schema_id: int
    base_manifest_list: str
    delta_manifest_list: str
    commit_user: str
    commit_identifier: int
    commit_kind: str
    time_millis: int
    total_record_count: int
    delta_record_count: int
    base_manifest_list_size: int | None = None
    delta_manifest_list_size: int | None = None
    changelog_manifest_list: str | None = None
    changelog_manifest_list_size: int | None = None
    index_manifest: str | None = None
    changelog_record_count: int | None = None
    watermark: int | None = None
    next_row_id: int | None = None  # row tracking's (Paimon 1.1+), which we keep when read, never write
    operation: str | None = None  # Paimon 2.0's (WRITE, DELETE, MERGE, ...): as above
    version: int = 3

    _JSON = {
        "version": "version", "id": "id", "schemaId": "schema_id", "baseManifestList": "base_manifest_list",
        "baseManifestListSize": "base_manifest_list_size", "deltaManifestList": "delta_manifest_list",
        "deltaManifestListSize": "delta_manifest_list_size", "changelogManifestList": "changelog_manifest_list",
        "changelogManifestListSize": "changelog_manifest_list_size",
        "indexManifest": "index_manifest", "commitUser": "commit_user", "commitIdentifier": "commit_identifier",
        "commitKind": "commit_kind", "timeMillis": "time_millis", "totalRecordCount": "total_record_count",
        "deltaRecordCount": "delta_record_count", "changelogRecordCount": "changelog_record_count",
        "watermark": "watermark", "nextRowId": "next_row_id", "operation": "operation",
    }

    def same_as(self, other: "Snapshot | None") -> bool:
        """Whether `other` is this very snapshot, not one that reuses its id after a rollback."""
        return other is not None and (self.id, self.time_millis, self.commit_user, self.base_manifest_list) == (
            other.id, other.time_millis, other.commit_user, other.base_manifest_list)

    def to_json(self) -> str:
        values = asdict(self)
        out = {}
        for key, attr in self._JSON.items():
            v = values[attr]
            if v is not None or key == "changelogManifestList":
                out[key] = v
        return json.dumps(out, indent=2)

    @classmethod
    def from_json(cls, text: str, where: str) -> "Snapshot":
        try:
            d = json.loads(text)
        except ValueError as e:
            raise CorruptTableError(f"{where} is not valid JSON: {e}") from None
        if d.get("version", 3) not in (1, 2, 3):
            raise CorruptTableError(f"{where} has snapshot version {d.get('version')}; dbt-paimon reads 1 to 3")
        try:
            kwargs = {attr: d.get(key) for key, attr in cls._JSON.items() if key in d}
            for required in ("id", "schemaId", "baseManifestList", "deltaManifestList", "commitKind"):
                if required not in d:
                    raise KeyError(required)
            kwargs.setdefault("commit_user", "")
            kwargs.setdefault("commit_identifier", BATCH_COMMIT_IDENTIFIER)
            kwargs.setdefault("time_millis", 0)
            kwargs.setdefault("total_record_count", 0)
            kwargs.setdefault("delta_record_count", 0)
            return cls(**kwargs)
        except KeyError as e:
            raise CorruptTableError(f"{where} lacks the field {e}") from None


class SnapshotManager:
    """The snapshots of one branch of a table (main unless given)."""

    def __init__(self, io: FileIO, table_path: str, branch: str | None = None):
        self.io = io
        self.branch = normalize(branch)
        self.dir = f"{branch_root(table_path, self.branch)}/snapshot"

    def path(self, snapshot_id: int) -> str:
        return f"{self.dir}/snapshot-{snapshot_id}"

    def exists(self, snapshot_id: int) -> bool:
        return self.io.exists(self.path(snapshot_id))

    def ids(self) -> list[int]:
        return sorted(int(n[9:]) for n in self.io.list_names(self.dir) if n.startswith("snapshot-") and n[9:].isdigit())

    def _hint(self, name: str) -> int | None:
        try:
            text = self.io.read_text(f"{self.dir}/{name}").strip()
            return int(text) if text.isdigit() else None
        except FileNotFoundError:
            return None

    def latest_id(self) -> int | None:
        """LATEST is only a hint: trust it when snapshot-(N+1) does not exist, else look further."""
        hint = self._hint("LATEST")
        if hint is not None and self.exists(hint):
            n = hint
            while self.exists(n + 1):
                n += 1
            return n
        ids = self.ids()
        return ids[-1] if ids else None

    def earliest_id(self) -> int | None:
        hint = self._hint("EARLIEST")
        if hint is not None and self.exists(hint):
            n = hint
            # Expiration may have removed snapshots after writing the hint; never return a missing one.
            while n > 1 and self.exists(n - 1):
                n -= 1
            return n
        ids = self.ids()
        return ids[0] if ids else None

    def snapshot(self, snapshot_id: int) -> Snapshot:
        path = self.path(snapshot_id)
        try:
            text = self.io.read_text(path)
        except FileNotFoundError:
            raise CorruptTableError(f"snapshot {snapshot_id} does not exist ({path})") from None
        return Snapshot.from_json(text, where=path)

    def travelled(self, snapshot_id: int) -> Snapshot:
        """The snapshot a read asks for by id (time travel): one not there is the reader's mistake,
        not a corrupt table, and the error says which snapshots there are."""
        found = self.try_snapshot(snapshot_id)
        if found is None:
            earliest, latest = self.earliest_id(), self.latest_id()
            there = f"snapshots {earliest}..{latest}" if latest is not None else "no snapshots"
            raise PaimonError(f"snapshot {snapshot_id} does not exist: the table has {there}")
        return found

    def at_or_before(self, millis: int) -> Snapshot | None:
        """The last snapshot committed at or before `millis` (commit times only grow): a binary search
        over the retained snapshots; None when the earliest is later (or there is none)."""
        found = None
        low, high = self.earliest_id(), self.latest_id()
        while low is not None and high is not None and low <= high:
            mid = (low + high) // 2
            snap = self.snapshot(mid)
            if snap.time_millis <= millis:
                found, low = snap, mid + 1
            else:
                high = mid - 1
        return found

    def try_snapshot(self, snapshot_id: int) -> Snapshot | None:
        """The snapshot, or None when its file is gone (expired or rolled back meanwhile)."""
        try:
            text = self.io.read_text(self.path(snapshot_id))
        except FileNotFoundError:
            return None
        return Snapshot.from_json(text, where=self.path(snapshot_id))

    def delete(self, snapshot_id: int) -> bool:
        return self.io.delete(self.path(snapshot_id))

    def earliest_hint(self) -> int | None:
        """The id the EARLIEST hint holds (None when absent or unreadable)."""
        return self._hint("EARLIEST")

    def latest(self) -> Snapshot | None:
        n = self.latest_id()
        return None if n is None else self.snapshot(n)

    def try_commit(self, snapshot: Snapshot) -> bool:
        """Create snapshot-N if absent; False when another writer committed N first."""
        return self.io.write_exclusive(self.path(snapshot.id), snapshot.to_json())

    def commit_latest_hint(self, snapshot_id: int) -> None:
        self.io.overwrite_text(f"{self.dir}/LATEST", str(snapshot_id))

    def commit_earliest_hint(self, snapshot_id: int) -> None:
        self.io.overwrite_text(f"{self.dir}/EARLIEST", str(snapshot_id))
