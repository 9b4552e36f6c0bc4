"""Reading the data file formats Paimon writes: Parquet, ORC and Avro.

A Paimon table's `file.format` (and `file.format.per.level`, e.g. `0:avro`, Paimon's advice for
write-heavy tables) choose the format of the files a writer makes; a reader tells each file's format
by its name's extension (Paimon's DataFilePathFactory.formatIdentifier), so one table may hold all
three after an ALTER or under a per-level setting. dbt-paimon writes Parquet and reads all three, so
that tables other writers made in ORC or Avro are read, upserted into, compacted and bootstrapped.

- Parquet and ORC are read by pyarrow, columnar, only the columns asked for.
- Avro is read by fastavro, record by record in its C reader (Avro is row-oriented; there is no
  columnar reader of it for Python), with a reader schema of only the columns asked for so the
  others are skipped undecoded, then made a table in one `from_pylist` call. fastavro gives a
  timestamp as a UTC datetime: Paimon stores a TIMESTAMP's wall clock as if it were UTC, so the
  value is kept and the zone dropped.
"""

from __future__ import annotations

import os
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..common.errors import CorruptTableError
from ..common.fileio import FileIO

FORMATS = ("parquet", "orc", "avro")

# Avro logical timestamp types and the Arrow unit of their stored long
_AVRO_TIMESTAMPS = {"timestamp-millis": "ms", "timestamp-micros": "us", "timestamp-nanos": "ns",
                    "local-timestamp-millis": "ms", "local-timestamp-micros": "us", "local-timestamp-nanos": "ns"}
_AVRO_PRIMITIVES = {"long": pa.int64(), "int": pa.int32(), "float": pa.float32(), "double": pa.float64(),
                    "boolean": pa.bool_(), "string": pa.string(), "bytes": pa.binary(), "fixed": pa.binary()}


def format_of(file_name: str) -> str:
    """The format of a data file, from its name's extension, as Paimon's readers tell it."""
    ext = file_name.rsplit(".", 1)[-1].lower() if "." in file_name else ""
    if ext not in FORMATS:
        raise CorruptTableError(f"data file {file_name} has no format Paimon writes (its name ends neither in "
                                f"{', '.join('.' + f for f in FORMATS)})")
    return ext


def read_file(io: FileIO, path: str, columns: Sequence[str] | None = None) -> pa.Table:
    """(A projection of) one data file of any of Paimon's formats. KeyError for a column the file
    lacks (a Parquet file's own error, the same for the others)."""
    fmt = format_of(path.rsplit("/", 1)[-1])
    # a damaged Parquet file fails in Arrow; an ORC or Avro one in its decoder's own way (EOFError,
    # a codec's error, ...): each is a damaged file, named as such
    damaged = (pa.ArrowInvalid, OSError) if fmt == "parquet" else (Exception,)
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq
            # ParquetFile, not read_table: the latter would take `dt=...` directories as hive partitions.
            with pq.ParquetFile(io.open_input(path), pre_buffer=True) as f:
                return f.read(columns=list(columns) if columns is not None else None, use_threads=True)
        if fmt == "orc":
            return _read_orc(io, path, columns)
        return _read_avro(io, path, columns)
    except FileNotFoundError:
        raise CorruptTableError(f"data file {path} is missing") from None
    except (KeyError, CorruptTableError):
        raise
    except damaged as e:
        raise CorruptTableError(f"data file {path} is unreadable: {e}") from None


def _read_orc(io: FileIO, path: str, columns: Sequence[str] | None) -> pa.Table:
    import pyarrow.orc as orc
    f = orc.ORCFile(io.open_input(path))
    if columns is not None:
        missing = [c for c in columns if c not in f.schema.names]
        if missing:
            raise KeyError(missing[0])
    table = f.read(columns=list(columns) if columns is not None else None)
    # ORC timestamps read as nanoseconds (the caller casts to the column's unit). A TIMESTAMP WITH
    # LOCAL TIME ZONE (ORC's instant type) Paimon writes as the JVM's local reading of its UTC wall
    # clock and reads back the same way, so the value depends on the JVM's default zone: read as a
    # Paimon reader on this host would (with the writer's zone, the only way Paimon reads it right).
    zone = jvm_default_zone()
    if zone in _UTC:
        return table
    nested = [n for n, c in zip(table.column_names, table.columns) if _nested_instant(c.type)]
    if nested:
        raise CorruptTableError(f"data file {path}: column {nested[0]!r} holds a TIMESTAMP WITH LOCAL TIME ZONE inside "
                                f"a nested value in ORC, which dbt-paimon reads in the UTC zone only (this host's JVM "
                                f"zone is {zone})")
    arrays = [pc.local_timestamp(c.cast(pa.timestamp(c.type.unit, tz=zone))).cast(pa.timestamp(c.type.unit, tz="UTC"))
              if pa.types.is_timestamp(c.type) and c.type.tz is not None else c for c in table.columns]
    return pa.Table.from_arrays(arrays, names=table.column_names)


def _nested_instant(t: pa.DataType, inside: bool = False) -> bool:
    """Whether a nested Arrow type holds a timestamp with a zone."""
    if pa.types.is_timestamp(t):
        return inside and t.tz is not None
    if pa.types.is_map(t):
        return _nested_instant(t.key_type, True) or _nested_instant(t.item_type, True)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _nested_instant(t.value_type, True)
    if pa.types.is_struct(t):
        return any(_nested_instant(t.field(i).type, True) for i in range(t.num_fields))
    return False


_UTC = ("UTC", "Etc/UTC", "GMT", "Etc/GMT", "Z", "Universal", "Etc/Universal", "Zulu", "Etc/Zulu")


def jvm_default_zone() -> str:
    """The time zone a JVM on this host defaults to (Java's TimeZone.getDefault on Linux: $TZ, else
    /etc/timezone, else where /etc/localtime links)."""
    zone = os.environ.get("TZ", "").lstrip(":")
    if not zone and os.path.exists("/etc/timezone"):
        with open("/etc/timezone") as f:
            zone = f.read().strip()
    if not zone and os.path.islink("/etc/localtime"):
        target = os.path.realpath("/etc/localtime")
        zone = target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else ""
    return zone or "UTC"


def _read_avro(io: FileIO, path: str, columns: Sequence[str] | None) -> pa.Table:
    import fastavro
    source = io.open_input(path)
    with (open(source, "rb") if isinstance(source, str) else source) as stream:
        header = fastavro.reader(stream)
        writer = header.writer_schema
        fields = {f["name"]: f for f in writer["fields"]}
        names = list(fields) if columns is None else list(columns)
        missing = [c for c in names if c not in fields]
        if missing:
            raise KeyError(missing[0])
        arrow = pa.schema([(n, _avro_arrow(fields[n]["type"], path, n)) for n in names])
        stream.seek(0)
        records = list(fastavro.reader(stream, reader_schema={**writer, "fields": [fields[n] for n in names]}))
    table = pa.Table.from_pylist(records, schema=arrow)
    # timestamps were filled as UTC instants (how fastavro gives them): their stored value, naive
    return pa.Table.from_arrays([c.cast(pa.timestamp(c.type.unit)) if pa.types.is_timestamp(c.type) else c
                                 for c in table.columns], names=names)


def _avro_arrow(t, path: str, column: str) -> pa.DataType:
    """The Arrow type that fastavro's values of an Avro field type fill."""
    if isinstance(t, list):  # a union: Paimon writes ["null", X] for a nullable X
        inner = [x for x in t if x != "null"]
        if len(inner) == 1:
            return _avro_arrow(inner[0], path, column)
    elif isinstance(t, str) and t in _AVRO_PRIMITIVES:
        return _AVRO_PRIMITIVES[t]
    elif isinstance(t, dict):
        logical = t.get("logicalType")
        if logical in _AVRO_TIMESTAMPS:
            return pa.timestamp(_AVRO_TIMESTAMPS[logical], tz="UTC")
        if logical == "decimal":
            return pa.decimal128(int(t["precision"]), int(t.get("scale", 0)))
        if logical == "date":
            return pa.date32()
        if logical is None and t.get("type") in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[t["type"]]
    raise CorruptTableError(f"data file {path}: column {column!r} has Avro type {t!r}, which dbt-paimon does not "
                            f"read (it reads the atomic types it writes)")
