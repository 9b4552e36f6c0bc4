"""Incremental reads: the records the snapshots after one and up to another wrote, as Paimon's batch
read with `incremental-between` gives them (its IncrementalStartingScanner).

`incremental-between = 'S,E'` reads snapshots S+1 .. E (the start is exclusive; S may be 0, before
the first snapshot). `incremental-between-scan-mode` says which files:
- `delta`: the data files each APPEND commit of the range added (compactions and overwrites are
  not changes of the rows);
- `changelog`: the changelog files each commit of the range added (the `input` producer writes
  them with its APPEND commits, `lookup` and `full-compaction` with compactions);
- `auto` (the default): `changelog` when the table has a changelog producer, else `delta`.

Each file's records are read as they are stored, not merged: a key written twice in the range is
read twice, a deletion as a `-D` record, each record with its row kind (`rowkind`: +I, -U, +U, -D,
the column Paimon's audit_log table names so). Files are read in the current schema (fields matched
by id), as every read here. Paimon's `diff` mode compares the two snapshots instead (diff.py);
between.py chooses from Paimon's options.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..common import binary_row
from ..common.errors import PaimonError
from ..common.fileio import FileIO
from ..common.paths import bucket_dir, partition_path
from ..format.datafile import SEQUENCE_NUMBER, VALUE_KIND
from ..manifest.manifest import ADD, ManifestEntry, ManifestFile, ManifestList
from ..schema.schema import TableSchema
from ..snapshot.snapshot import Snapshot, SnapshotManager
from .read import TableRead
from .scan import DataSplit

SCAN_MODES = ("auto", "delta", "changelog")
ROW_KIND = "rowkind"
ORDER_SCHEMA = pa.schema([pa.field("_SNAPSHOT_ID", pa.int64(), False), pa.field("_BUCKET", pa.int32(), False),
                          pa.field(SEQUENCE_NUMBER, pa.int64(), False)])
# files of a range read at once by one task
_READERS = 4
# RowKind bytes (_VALUE_KIND) -> Paimon's short strings
KIND_NAMES = ("+I", "-U", "+U", "-D")


@functools.cache
def _kind_names() -> pa.Array:
    # made at first use: pyarrow's first array of Python values imports pandas (~0.3 s), which a
    # module import must not cost every process that loads the store
    return pa.array(KIND_NAMES, pa.string())


def row_kinds(value_kinds) -> pa.ChunkedArray | pa.Array:
    """_VALUE_KIND bytes as Paimon's short strings."""
    return pc.take(_kind_names(), pc.cast(value_kinds, pa.int32()))


def scan_mode(schema: TableSchema, mode: str | None) -> str:
    """The files a scan mode reads on this table: 'delta' or 'changelog'."""
    mode = (mode or "auto").lower()
    if mode == "diff":  # two snapshots compared, not records read: between.py plans it (diff.py)
        raise PaimonError("incremental-between-scan-mode 'diff' compares two snapshots; it reads no records")
    if mode not in SCAN_MODES:
        raise PaimonError(f"incremental-between-scan-mode must be one of {', '.join(SCAN_MODES)}, diff; got {mode!r}")
    if mode == "auto":
        return "changelog" if not schema.is_append and schema.core.changelog_producer != "none" else "delta"
    return mode  # `changelog` on an append table, or a key table without a producer: no files, no records


def snapshots_between(snapshots: SnapshotManager, start: int, end: int) -> list[Snapshot]:
    """Snapshots start+1 .. end; an end not there, or a start whose next snapshot expired, is an
    error naming the snapshots there are."""
    earliest, latest = snapshots.earliest_id(), snapshots.latest_id()
    there = f"snapshots {earliest}..{latest}" if latest is not None else "no snapshot"
    if latest is None or end > latest or start + 1 < earliest:
        raise PaimonError(f"incremental-between {start},{end}: the table has {there} "
                          f"(the start is exclusive: snapshot {start + 1} must still be there)")
    return [snapshots.snapshot(i) for i in range(start + 1, end + 1)]


def entries_between(io: FileIO, table_path: str, schema: TableSchema, snapshots: Sequence[Snapshot],
                    mode: str) -> list[tuple[int, ManifestEntry]]:
    """The files the range's commits added that `mode` ('delta' or 'changelog') reads, in commit
    order, each with the id of the snapshot that added it."""
    lists = ManifestList(io, table_path)
    manifests = ManifestFile(io, table_path, schema.partition_types, schema.id)
    out: list[tuple[int, ManifestEntry]] = []
    for snap in snapshots:
        if mode == "delta":
            name = snap.delta_manifest_list if snap.commit_kind == "APPEND" else None
        else:
            name = snap.changelog_manifest_list
        if not name:
            continue
        for meta in lists.read(name):
            out += [(snap.id, e) for e in manifests.read(meta.file_name, meta.file_size) if e.kind == ADD]
    return out


def plan_between(io: FileIO, table_path: str, schema: TableSchema, start: int, end: int,
                 mode: str | None = None) -> list[tuple[int, ManifestEntry]]:
    """The files an incremental read of snapshots start+1 .. end reads (manifests only), each with
    the snapshot that added it."""
    files = scan_mode(schema, mode)
    snapshots = snapshots_between(SnapshotManager(io, table_path, schema.branch), start, end)
    return entries_between(io, table_path, schema, snapshots, files)


def read_entries(io: FileIO, table_path: str, schema: TableSchema, entries: Sequence[tuple[int, ManifestEntry]],
                 projection: Sequence[str] | None = None, order: bool = False) -> pa.Table:
    """The records of some files of plan_between, unmerged, `rowkind` first. order: with where each
    record stands in the table's history after the row kind (ORDER_SCHEMA: the snapshot that wrote
    it, its bucket, its sequence number), which is what folding a key's records into its last
    change needs (engine/read/changes.py)."""
    reader = TableRead(io, table_path, schema, projection)
    head = [pa.field(ROW_KIND, pa.string(), False)] + (list(ORDER_SCHEMA) if order else [])
    out_schema = pa.schema(head + list(reader.output_schema))
    decoded = {p: binary_row.deserialize(p, schema.partition_types) for p in {e.partition for _, e in entries}}

    def one(snapshot_id: int, e: ManifestEntry) -> pa.Table:
        values = decoded[e.partition]
        where = bucket_dir(table_path, partition_path(values, schema.partition_types, schema.partition_keys,
                                                      schema.core.partition_default_name), e.bucket)
        split = DataSplit(0, e.partition, values, e.bucket, e.total_buckets, where, [e.file])
        if schema.is_append:
            rows = reader.read_files(split, [e.file])
            kinds = pa.repeat(pa.scalar("+I"), rows.num_rows)
            sequences = pa.array(np.arange(rows.num_rows, dtype=np.int64))
        else:
            kv = reader.read_file_kv(split, e.file)
            rows = kv.select(reader.projection)
            kinds = row_kinds(kv.column(VALUE_KIND))
            sequences = kv.column(SEQUENCE_NUMBER)
        n = rows.num_rows
        placed = [pa.repeat(pa.scalar(snapshot_id, pa.int64()), n), pa.repeat(pa.scalar(e.bucket, pa.int32()), n),
                  sequences] if order else []
        return pa.Table.from_arrays([kinds] + placed + rows.columns, schema=out_schema)

    if len(entries) < 2:
        parts = [one(*entry) for entry in entries]
    else:
        # a range's files are many and small (one per bucket a commit touched): a few read at once,
        # pyarrow's decoding of one overlapping the Python around the next (in the files' order)
        with ThreadPoolExecutor(max_workers=min(_READERS, len(entries))) as pool:
            parts = list(pool.map(lambda entry: one(*entry), entries))
    return pa.concat_tables(parts) if parts else out_schema.empty_table()
