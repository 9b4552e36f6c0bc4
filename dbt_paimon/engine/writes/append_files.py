"""The Spark task that writes an append table's files: its rows in, its manifest entries out. Used by
an append or overwrite (append.py) and by a copy-on-write (rewrite.py)."""

from __future__ import annotations

import pickle
from typing import Iterator

import pyarrow as pa

from ...assign.rows import PAYLOAD
from ...store.write.append import AppendWrite
from ...store.common.fileio import FileIO
from ...store.schema.schema import TableSchema


def append_task(path: str, schema: TableSchema, io: FileIO, next_sequence: dict):
    """A mapInArrow function: a Spark task's rows written as files, its manifest entries the payload."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # the task's rows at once: one file per (partition, bucket) and target size, not per Arrow batch
        batches = list(batches)
        writer = AppendWrite(io, path, schema, next_sequence)
        entries = writer.write(pa.Table.from_batches(batches)) if batches else []
        yield pa.RecordBatch.from_arrays([pa.array([pickle.dumps(entries)], pa.binary())], schema=PAYLOAD)
    return run
