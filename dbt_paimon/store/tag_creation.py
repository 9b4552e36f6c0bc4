"""Tags a batch write creates (`tag.automatic-creation` = batch): Paimon's TagBatchCreation, which its
Spark and Flink batch writers run once their commit (and its maintenance) is done.

The latest snapshot is tagged `batch-write-<yyyy-MM-dd>` (its commit time's local date), or
tag.batch.customized-name: a tag of that name already there is deleted first, so a day's tag holds
the day's last batch. tag.default-time-retained gives the tag a lifetime (expire_tags); with
tag.num-retained-max, the oldest tags of the table (by snapshot, manual ones too) are deleted
until that many are left, as Paimon counts them.
"""

from __future__ import annotations

import datetime as dt
import logging

from .options import parse_duration_ms

log = logging.getLogger(__name__)

BATCH = "batch"
MODES = ("none", BATCH)


def batch_tag_name(core, snapshot) -> str:
    custom = core.get("tag.batch.customized-name")
    if custom:
        return custom
    return "batch-write-" + dt.datetime.fromtimestamp(snapshot.time_millis / 1000).strftime("%Y-%m-%d")


def create_batch_tag(table) -> str | None:
    """After a batch write: tag the latest snapshot as tag.automatic-creation = batch says; the tag's
    name, or None when the table asks for none."""
    core = table.schema.core
    if (core.get("tag.automatic-creation") or "none").lower() != BATCH:
        return None
    latest = table.latest_snapshot()
    if latest is None:
        return None
    name = batch_tag_name(core, latest)
    if table.tags.exists(name):
        table.delete_tag(name)
    retained = core.get("tag.default-time-retained")
    table.create_tag(name, latest.id, dt.timedelta(milliseconds=parse_duration_ms("tag.default-time-retained",
                                                                                  retained)) if retained else None)
    keep = core.get("tag.num-retained-max")
    if keep:
        tags = sorted(table.list_tags(), key=lambda t: (t.snapshot_id, t.name))
        for old in tags[:max(0, len(tags) - int(keep))]:
            table.delete_tag(old.name)
            log.info("deleted tag %s of %s (tag.num-retained-max %s)", old.name, table.path, keep)
    return name
