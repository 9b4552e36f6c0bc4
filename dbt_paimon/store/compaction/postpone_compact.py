"""Postpone compaction: the rows other writers parked in bucket -2 of a postpone-bucket table, moved
into their real buckets, as Paimon's compact of such a table moves them.

Paimon's streaming writers (and its plain batch write API) park rows in `bucket-postpone/` files:
Avro, unsorted, in arrival order, -D/-U rows kept, sequence numbers not yet given. No batch reader
reads them until a compaction moves them (PostponeUtils.tableForPostponeRewrite): each partition's
rows are read file after file in the order they were written, each row goes to the bucket that
Paimon's fixed-bucket hash of its bucket key gives under the partition's bucket count (the count of
its real-bucket files; `postpone.default-bucket-num` for a partition that has none), and a bucket's
writer gives them the bucket's next sequence numbers in that order, so a later version of a key wins
over an earlier one and over what the bucket held. The parked files are deleted in the same COMPACT
commit.

Here the moved rows join the full compaction of their bucket (engine/writes/compaction.py compact): they
are merged with the bucket's files at once, which is where Paimon's compaction of the rewritten
level-0 files leaves them too. The driver reads the parked rows and hands each bucket's to the task
that compacts it: a backlog of parked rows must fit in the driver (a streaming writer's increments
between compactions do; Paimon's own job reads them in its tasks).
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa

from ..format.datafile import SEQUENCE_NUMBER
from ..common.errors import SchemaError
from ..common.key_hash import java_bucket, key_hashes
from ..manifest.manifest import DELETE, ManifestEntry
from ..write.postpone import PartitionBuckets
from ..read.read import TableRead
from ..read.scan import DataSplit, Plan, next_sequences

_OLDEST = dt.datetime.min


def check_movable(schema, path: str) -> None:
    """Refuse what the move cannot do right: deletion vectors (a moved row would have to mark the
    older row of its key in a vector) and a changelog derived by compaction (the moved rows are
    what it would have to be derived from)."""
    if schema.core.deletion_vectors:
        raise SchemaError(f"table {path} has rows waiting in bucket -2 and deletion vectors: dbt-paimon does not "
                          "move parked rows into a table with deletion vectors (Paimon's compact does)")
    producer = schema.core.changelog_producer
    if producer in ("lookup", "full-compaction"):
        raise SchemaError(f"table {path} has rows waiting in bucket -2 and changelog-producer {producer!r}: "
                          "dbt-paimon does not derive the changelog of parked rows moved into buckets (Paimon's "
                          "compact does)")


def parked_rows(table, split: DataSplit) -> pa.Table:
    """One partition's parked rows (a bucket -2 split) as KeyValues, in the order they were written:
    file after file by creation time, each file's rows in file order."""
    reader = TableRead(table.io, table.path, table.schema)
    files = sorted(split.files, key=lambda f: (f.creation_time or _OLDEST, f.file_name))
    return pa.concat_tables([reader.read_file_kv(split, f) for f in files])


def moved(table, plan: Plan) -> tuple[dict[tuple[bytes, int], tuple[DataSplit, pa.Table]], list[ManifestEntry]]:
    """Where the parked rows of `plan` go: {(partition, bucket): (the bucket's split, its moved
    KeyValue rows with their new sequence numbers)}, a bucket without files getting an empty split
    written for its partition's count; and the DELETE entries of the parked files."""
    schema = table.schema
    counts = PartitionBuckets.of_plan(schema, plan)
    splits = {(s.partition, s.bucket): s for s in plan.splits}
    next_seq = next_sequences(plan.splits)
    keys = schema.bucket_keys
    out, deletes = {}, []
    for parked in plan.parked:
        deletes += [ManifestEntry(DELETE, parked.partition, parked.bucket, parked.total_buckets, f)
                    for f in parked.files]
        rows = parked_rows(table, parked)
        if rows.num_rows == 0:
            continue
        n = counts.of_partition(parked.partition)
        buckets = java_bucket(key_hashes([rows.column(k) for k in keys], [schema.field(k).type for k in keys]), n)
        order = np.argsort(buckets, kind="stable")  # arrival order within each bucket
        bounds = np.flatnonzero(np.diff(buckets[order])) + 1
        for part in np.split(order, bounds):
            bucket = int(buckets[part[0]])
            split = splits.get((parked.partition, bucket)) or DataSplit(
                parked.snapshot_id, parked.partition, parked.partition_values, bucket, n,
                table.bucket_path(parked.partition_values, bucket), [])
            first = next_seq.get((parked.partition, bucket), 0)
            taken = rows.take(pa.array(part))
            sequence = pa.array(np.arange(first, first + len(part), dtype=np.int64))
            taken = taken.set_column(taken.schema.get_field_index(SEQUENCE_NUMBER), SEQUENCE_NUMBER, sequence)
            out[(parked.partition, bucket)] = (split, taken)
    return out, deletes
