"""The settings of one upsert run, apart from the table's options.

A table's options (store/common/options.py CoreOptions) describe the table and must match the stored ones
on every run. A run's settings steer one job: where it runs (`execution`), how many assigners,
writers and bootstrap tasks it uses, how often its commit is retried, and the object store's
settings. Paimon users give the first four among the table options, by Paimon's names
(RUN_KEYS), and the object store's settings too (store/common/fileio.py is_storage_option):
`RunSettings.from_options` takes them out, so they are never compared with the stored options, and
store settings never reach the stored ones.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Mapping

from ..store.common import options as opts
from ..store.common.branch import is_main
from ..store.common.errors import SchemaError
from ..store.common.fileio import is_storage_option
from ..store.common.options import ValueEnum


class Execution(ValueEnum):
    """Where an upsert job runs: "distributed" the Spark job; "local" its topology inside the driver
    (engine/runtime/local.py); "auto" local on a local master when the batch and the table's keys fit."""

    AUTO = "auto"
    LOCAL = "local"
    DISTRIBUTED = "distributed"

    @classmethod
    def parse(cls, value: object) -> "Execution":
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"execution must be one of {', '.join(EXECUTIONS)}, got {value!r}") from None


EXECUTIONS = tuple(e.value for e in Execution)

# RunSettings field -> the option's Paimon name
RUN_KEYS = {
    "assigner_parallelism": "dynamic-bucket.assigner-parallelism",
    "sink_parallelism": "sink.parallelism",
    "bootstrap_parallelism": "cross-partition-upsert.bootstrap-parallelism",
    "commit_max_retries": "commit.max-retries",
}
RUN_OPTIONS = frozenset(RUN_KEYS.values())
BRANCH = "branch"  # Paimon's option: the branch a write goes to (a run's setting too, never stored)


def _parse(key: str, raw: object) -> int:
    """A run key's value, checked as the table option of that name is (same messages)."""
    value = str(raw).lower() if isinstance(raw, bool) else str(raw)
    if key == "commit.max-retries":
        n = opts.parse_int(key, value)
        if n < 0:
            raise SchemaError(f"option {key!r} must be positive, got {value}")
        return n
    return opts.parse_positive(key, value)


@dataclass(frozen=True)
class RunSettings:
    """One run's settings; None: the table's stored option, else the engine's default."""

    execution: Execution = Execution.AUTO
    assigner_parallelism: int | None = None
    sink_parallelism: int | None = None
    bootstrap_parallelism: int | None = None
    commit_max_retries: int | None = None
    storage_options: Mapping[str, object] | None = None
    # cross-partition tables, driver-local jobs: bootstrap from the key index beside the table
    # (dbt_paimon/key_index/) instead of reading every key of the table
    key_index: bool = True
    # the branch written (Paimon's `branch` option; None: main), which must exist
    branch: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "execution", Execution.parse(self.execution))
        object.__setattr__(self, "branch", None if is_main(self.branch) else str(self.branch).strip())
        for name, key in RUN_KEYS.items():
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _parse(key, value))

    @classmethod
    def from_options(cls, options: Mapping[str, object] | None,
                     base: "RunSettings | None" = None) -> tuple["RunSettings", dict[str, object]]:
        """(run settings, table options) of a user's options dict: the run keys by their Paimon
        names and the store settings go to the run settings, the rest are table options. The run
        keys given override `base`'s; `base`'s storage_options override store settings given
        among the options."""
        base = base or cls()
        by_key = {key: name for name, key in RUN_KEYS.items()}
        run: dict[str, object] = {}
        storage: dict[str, object] = {}
        table: dict[str, object] = {}
        for key, value in (options or {}).items():
            if key in by_key:
                run[by_key[key]] = _parse(key, value)
            elif key == BRANCH:
                run["branch"] = value
            elif is_storage_option(key):
                storage[key] = value
            else:
                table[key] = value
        if base.storage_options or storage:
            run["storage_options"] = {**storage, **(base.storage_options or {})}
        return replace(base, **run), table

    def over(self, stored: Mapping[str, str]) -> "RunSettings":
        """These settings, each unset run key taken from the table's stored options (a table
        created with them keeps them, as in Paimon)."""
        filled = {name: int(stored[key]) for name, key in RUN_KEYS.items()
                  if getattr(self, name) is None and stored.get(key) is not None}
        return replace(self, **filled) if filled else self

    def run_options(self) -> dict[str, str]:
        """The run keys set, by Paimon's names (stored with a new table, as Paimon stores them)."""
        return {key: str(getattr(self, name)) for name, key in RUN_KEYS.items() if getattr(self, name) is not None}

    def __repr__(self) -> str:  # store settings hold secrets: never printed
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)
                          if f.name != "storage_options" and getattr(self, f.name) is not None)
        hidden = f", storage_options=<{len(self.storage_options)} hidden>" if self.storage_options else ""
        return f"RunSettings({shown}{hidden})"
