"""Partition expiration (`partition.expiration-time`): Paimon's PartitionExpire, run by a writer after
its commit.

A partition expires when its time is before now minus partition.expiration-time:
- values-time (partition.expiration-strategy, the default): the time its values say. Without
  partition.timestamp-pattern the first partition field's value is read; a pattern puts values in
  for `$<field>` (`$dt $hour:00:00`). partition.timestamp-formatter (Java DateTimeFormatter letters
  yyyy MM dd HH mm ss) reads the text; without one, `y-M-d[ H:m:s[.fraction]]`. A value that does not
  read as a time (a null, a DATE field, which Paimon reads as its day number) is left alone, as in
  Paimon, which logs it;
- update-time: the newest creation time of its live files.
Expired partitions are taken in the order of their values, at most partition.expiration-max-num (100),
partition.expiration-batch-size per commit: an OVERWRITE commit deleting every live file of them,
their index files gone with them (FileStoreCommit.overwrite). Their files stay until the snapshots
naming them expire. Tables without partitions, and write-only ones, expire nothing.

Paimon checks at most every partition.expiration-check-interval within one writer process, which a
batch job (a dbt run) outlives only by chance; ours checks after every commit, as Paimon's batch
writers do with end-input.check-partition-expire.
"""

from __future__ import annotations

import datetime as dt
import logging
import re

from ..common import binary_row
from ..schema.option_validation import strptime_format
from ..common.options import parse_duration_ms

log = logging.getLogger(__name__)

_DEFAULT = re.compile(r"^(\d{1,4})-(\d{1,2})-(\d{1,2})(?: (\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,9}))?)?$")


def partition_time(values: dict, schema) -> dt.datetime | None:
    """The time a partition's values say (values-time), or None when they say none."""
    core, keys = schema.core, schema.partition_keys
    pattern = core.get("partition.timestamp-pattern")
    if pattern:
        text = pattern
        for key in sorted(keys, key=len, reverse=True):  # longest first: $dt must not eat $dt1
            value = values.get(key)
            if f"${key}" in text and value is None:
                return None
            text = text.replace(f"${key}", "" if value is None else str(value))
    else:
        text = values.get(keys[0])
        if text is None or isinstance(text, dt.date):  # Paimon reads a DATE as its day number: no time
            return None
        text = str(text)
    formatter = core.get("partition.timestamp-formatter")
    try:
        if formatter:
            return dt.datetime.strptime(text, strptime_format(formatter))
        m = _DEFAULT.match(text)
        if not m:
            return None
        parts = [int(g) if g else 0 for g in m.groups()[:6]]
        micros = int((m.group(7) or "0").ljust(9, "0")[:6])
        return dt.datetime(*parts, micros)
    except ValueError:
        return None


def expired_partitions(table, now: dt.datetime | None = None) -> list[bytes]:
    """The partitions (serialized) that have expired, in Paimon's order and number."""
    schema = table.schema
    core = schema.core
    value = core.get("partition.expiration-time")
    if not value or not schema.partition_keys or core.write_only:
        return []
    now = now or dt.datetime.now()
    before = now - dt.timedelta(milliseconds=parse_duration_ms("partition.expiration-time", value))
    by_update = core.get("partition.expiration-strategy") == "update-time"
    times: dict[bytes, tuple[dict, dt.datetime | None]] = {}  # partition -> (values, its time)
    for split in table.plan().splits:  # a partition's buckets
        if split.partition in times and not by_update:
            continue  # values-time: a partition's values give its time once
        values = dict(zip(schema.partition_keys, split.partition_values))
        if by_update:  # creation times are instants (UTC): compared with `before` as one
            stamps = [f.creation_time for f in split.files if f.creation_time is not None]
            when = max(stamps).astimezone().replace(tzinfo=None) if stamps else None
        else:
            when = partition_time(values, schema)
        known = times.get(split.partition, (values, None))[1]
        times[split.partition] = (values, known if when is None or (known is not None and known >= when) else when)
    old = []
    for part, (values, when) in times.items():
        if when is None:
            log.warning("partition %s of %s has no time to expire by", values, table.path)
        elif before > when:
            old.append((",".join(str(v) for v in values.values()), part))
    return [part for _, part in sorted(old)][:int(core.get("partition.expiration-max-num"))]


def expire_partitions(table, now: dt.datetime | None = None) -> list[int]:
    """Drop the expired partitions (OVERWRITE commits); the snapshots committed."""
    parts = expired_partitions(table, now)
    if not parts:
        return []
    size = int(table.schema.core.get("partition.expiration-batch-size") or len(parts))
    out = []
    for i in range(0, len(parts), size):
        batch = parts[i:i + size]
        result = table.new_commit().overwrite([], set(batch))
        names = [dict(zip(table.schema.partition_keys, binary_row.deserialize(p, table.schema.partition_types)))
                 for p in batch]
        log.info("expired partitions %s of %s (snapshot %d)", names, table.path, result.snapshot.id)
        out.append(result.snapshot.id)
    return out
