"""ExistingProcessor: what a cross-partition table does with a key that already lives in another
partition, chosen by merge engine as Paimon's ExistingProcessor.create does."""

from __future__ import annotations

from enum import Enum

from ..store.errors import SchemaError
from ..store.options import MergeEngine


class ExistingAction(Enum):
    # deduplicate: -D in the old (partition, bucket), then the new row as a new key
    DELETE_OLD = "delete"
    # partial-update / aggregation: the row is rewritten into the old partition and bucket
    USE_OLD = "use-old"
    # first-row: the first version wins, the new row is dropped
    SKIP_NEW = "skip-new"


_BY_ENGINE = {
    MergeEngine.DEDUPLICATE: ExistingAction.DELETE_OLD,
    MergeEngine.PARTIAL_UPDATE: ExistingAction.USE_OLD,
    MergeEngine.AGGREGATION: ExistingAction.USE_OLD,
    MergeEngine.FIRST_ROW: ExistingAction.SKIP_NEW,
}


def existing_action(merge_engine: str) -> ExistingAction:
    try:
        return _BY_ENGINE[merge_engine]
    except KeyError:
        raise SchemaError(f"merge-engine {merge_engine!r} cannot be used on a cross-partition table") from None
