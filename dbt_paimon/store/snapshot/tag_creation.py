"""Tags writes create (`tag.automatic-creation`).

batch (Paimon's TagBatchCreation, which its Spark and Flink batch writers run once their commit and
its maintenance are done): the latest snapshot is tagged `batch-write-<yyyy-MM-dd>` (its commit time's local date), or
tag.batch.customized-name: a tag of that name already there is deleted first, so a day's tag holds
the day's last batch. tag.default-time-retained gives the tag a lifetime (expire_tags); with
tag.num-retained-max, the oldest tags of the table (by snapshot, manual ones too) are deleted
until that many are left, as Paimon counts them.

process-time (Paimon's TagAutoCreation, run after every commit): each snapshot since the newest tag
it made (the earliest, when none) whose commit time, less tag.creation-delay, has passed the end of
the period after the last tag's, is tagged with the period before its own (tag.creation-period
daily, hourly, two-hours; names by tag.period-formatter: `2026-11-27`, `2026-11-27 05`, ...). So the
first write tags its snapshot with the previous period, and each later period gets the first snapshot
committed after it ended. A tag of that name already there stays; tag.num-retained-max keeps that
many of these tags (others do not count).
"""

from __future__ import annotations

import datetime as dt
import logging

from ..common.options import TAG_PERIODS as PERIODS, parse_duration_ms

log = logging.getLogger(__name__)

BATCH, PROCESS_TIME = "batch", "process-time"
_FORMATS = {  # tag.period-formatter -> (daily name, hourly name)
    "with_dashes": ("%Y-%m-%d", "%Y-%m-%d %H"), "without_dashes": ("%Y%m%d", "%Y%m%d %H"),
    "without_dashes_and_spaces": ("%Y%m%d", "%Y%m%d%H")}


def _retention(core) -> dt.timedelta | None:
    """tag.default-time-retained: how long a tag made here lives (None: until deleted)."""
    value = core.get("tag.default-time-retained")
    return dt.timedelta(milliseconds=parse_duration_ms("tag.default-time-retained", value)) if value else None


def batch_tag_name(core, snapshot) -> str:
    custom = core.get("tag.batch.customized-name")
    if custom:
        return custom
    return "batch-write-" + dt.datetime.fromtimestamp(snapshot.time_millis / 1000).strftime("%Y-%m-%d")


def create_batch_tag(table) -> str | None:
    """After a batch write: tag the latest snapshot as tag.automatic-creation = batch says; the tag's
    name, or None when the table asks for none."""
    core = table.schema.core
    if core.get("tag.automatic-creation").lower() != BATCH:
        return None
    latest = table.latest_snapshot()
    if latest is None:
        return None
    name = batch_tag_name(core, latest)
    if table.tags.exists(name):
        table.delete_tag(name)
    table.create_tag(name, latest.id, _retention(core))
    log.info("tagged snapshot %d of %s as %s", latest.id, table.path, name)
    _retain(table, {t.name: t.snapshot_id for t in table.list_tags()}, core.get("tag.num-retained-max"))
    return name


def _retain(table, tags: dict[str, int], keep: str | None) -> None:
    """tag.num-retained-max: the oldest of `tags` (name -> snapshot id) deleted past `keep`."""
    if not keep or len(tags) <= int(keep):
        return
    for old in sorted(tags, key=lambda n: (tags[n], n))[:len(tags) - int(keep)]:
        table.delete_tag(old)
        log.info("deleted tag %s of %s (tag.num-retained-max %s)", old, table.path, keep)


def _period(core) -> tuple[dt.timedelta, str]:
    """The tag period and the strftime format of its names."""
    period = core.get("tag.creation-period").lower()
    daily, hourly = _FORMATS[core.get("tag.period-formatter").lower()]
    if period == "two-hours":
        hourly = "%Y-%m-%d %H"  # Paimon names two-hour periods so whatever the formatter
    return PERIODS[period], daily if period == "daily" else hourly


def _floor(when: dt.datetime, period: dt.timedelta) -> dt.datetime:
    day = when.replace(hour=0, minute=0, second=0, microsecond=0)
    return day + (when - day) // period * period


def process_time_tags(snapshots, auto_tags: dict[str, int], period: dt.timedelta, name_format: str,
                      delay: dt.timedelta = dt.timedelta(0)) -> list[tuple[str, int]]:
    """The (name, snapshot id) tags process-time creation adds, given the snapshots in id order (of
    those after the newest auto tag's) and the auto tags there are (name -> snapshot id)."""
    next_tag = None
    if auto_tags:
        newest = max(auto_tags, key=lambda n: (auto_tags[n], n))
        next_tag = dt.datetime.strptime(newest, name_format) + period
    out = []
    for snapshot in snapshots:
        when = dt.datetime.fromtimestamp(snapshot.time_millis / 1000)
        if next_tag is None or when - delay >= next_tag + period:
            tag_time = _floor(when, period) - period
            out.append((tag_time.strftime(name_format), snapshot.id))
            next_tag = tag_time + period
    return out


def create_process_time_tags(table) -> list[str]:
    """After a commit: the tags tag.automatic-creation = process-time adds (their names)."""
    core = table.schema.core
    if core.get("tag.automatic-creation").lower() != PROCESS_TIME:
        return []
    period, name_format = _period(core)
    auto = {}
    for tag in table.list_tags():
        try:
            dt.datetime.strptime(tag.name, name_format)
        except ValueError:
            continue  # not one of these tags
        auto[tag.name] = tag.snapshot_id
    mgr = table.snapshots
    start = max(auto.values()) + 1 if auto else (mgr.earliest_id() or 1)
    snapshots = [s for s in (mgr.try_snapshot(i) for i in range(start, (mgr.latest_id() or 0) + 1)) if s is not None]
    delay = dt.timedelta(milliseconds=parse_duration_ms("tag.creation-delay", core.get("tag.creation-delay")))
    made = []
    for name, snapshot_id in process_time_tags(snapshots, auto, period, name_format, delay):
        if table.tags.exists(name):
            continue
        table.create_tag(name, snapshot_id, _retention(core), ignore_if_exists=True)
        auto[name] = snapshot_id
        made.append(name)
        log.info("tagged snapshot %d of %s as %s", snapshot_id, table.path, name)
    if made:
        _retain(table, auto, core.get("tag.num-retained-max"))
    return made
