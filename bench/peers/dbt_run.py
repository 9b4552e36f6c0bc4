"""`dbt run` of a paimon_upsert model for W1: the engine plus dbt's own overhead (parse, compile,
adapter, materialization). Not measurable yet: the adapter `type: paimon` and its materialization
(issue 4) do not exist. The slot is here so the report keeps a row for it."""

from __future__ import annotations

import importlib.util

from peers.base import Peer as Base


class Peer(Base):
    label = "dbt run (paimon_upsert)"
    workloads = {"W1"}
    note = "full dbt run of one paimon_upsert model"

    def available(self):
        try:
            found = importlib.util.find_spec("dbt.adapters.paimon") is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            return "dbt adapter type: paimon (dbt.adapters.paimon) does not exist yet"
        return "the adapter exists, but this slot has no dbt project to run yet (bench/peers/dbt_run.py)"
