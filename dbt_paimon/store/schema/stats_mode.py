"""Which statistics collector a column gets, by Paimon's options (StatsCollectorFactories):
`fields.<f>.stats-mode`, then `metadata.stats-keep-first-n-columns`, then `metadata.stats-mode`.
Apart from the collectors (stats_collector.py) because validating a table's options needs the
modes, and the collectors need the table's schema.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from ..common.errors import SchemaError

NONE, COUNTS, FULL, TRUNCATE = "none", "counts", "full", "truncate"
DEFAULT_STATS_MODE = "truncate(16)"
STATS_MODE = "metadata.stats-mode"
STATS_DENSE_STORE = "metadata.stats-dense-store"
STATS_KEEP_FIRST_N_COLUMNS = "metadata.stats-keep-first-n-columns"
FIELD_STATS_MODE_SUFFIX = "stats-mode"
_TRUNCATE = re.compile(r"^TRUNCATE\((\d+)\)$")
_INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class StatsMode:
    """One collector kind: none, counts, full, or truncate with its length."""
    kind: str
    length: int = 0

    @staticmethod
    def parse(value: str, key: str = STATS_MODE) -> "StatsMode":
        """SimpleColStatsCollector.from: case-insensitive, `truncate(n)` with n > 0."""
        upper = str(value).upper()
        if upper in ("NONE", "COUNTS", "FULL"):
            return StatsMode(upper.lower())
        m = _TRUNCATE.match(upper)
        if m:
            n = int(m.group(1))
            if 0 < n <= _INT_MAX:
                return StatsMode(TRUNCATE, n)
            raise SchemaError(f"option {key!r}: truncate length must be within 1 .. {_INT_MAX}, got {value!r}")
        raise SchemaError(f"option {key!r} must be one of none, counts, full, truncate(<n>), got {value!r}")

    def __str__(self) -> str:
        return f"truncate({self.length})" if self.kind == TRUNCATE else self.kind


KEY_STATS_MODE = StatsMode(TRUNCATE, 128)  # StatsCollectorFactories: system fields (`_KEY_*`)


def field_stats_mode_key(field: str) -> str:
    return f"fields.{field}.{FIELD_STATS_MODE_SUFFIX}"


def value_stats_modes(options: Mapping[str, str], field_names: Sequence[str]) -> list[StatsMode]:
    """The collector of each value column (StatsCollectorFactories.createStatsFactories)."""
    default = StatsMode.parse(options.get(STATS_MODE, DEFAULT_STATS_MODE))
    keep_first = int(options.get(STATS_KEEP_FIRST_N_COLUMNS, "-1"))
    modes = []
    for i, name in enumerate(field_names):
        own = options.get(field_stats_mode_key(name))
        if own is not None:
            modes.append(StatsMode.parse(own, field_stats_mode_key(name)))
        elif 0 <= keep_first <= i:  # every value column counts towards n, with or without its own mode
            modes.append(StatsMode(NONE))
        else:
            modes.append(default)
    return modes
