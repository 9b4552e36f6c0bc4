"""The dbt adapter `type: paimon`: dbt-spark's in-process session, Paimon tables through the engine.

dbt finds it through the thin shim `dbt/adapters/paimon/`; the macros (the `paimon_upsert`
materialization and overrides of dbt-spark's macros) are the top-level `macros/` project.
"""

from __future__ import annotations

import os

from .connections import PaimonConnectionManager
from .credentials import PaimonCredentials
from .impl import PaimonAdapter, PaimonAdapterResponse
from .relation import PaimonRelation

PROJECT_NAME = "dbt_paimon"


def macros_path() -> str:
    """The dbt project holding our macros: installed as package data (dbt_paimon/macros) or, in a
    source checkout, the repository's top-level macros/."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for candidate in (os.path.join(here, "macros"), os.path.join(os.path.dirname(here), "macros")):
        if os.path.isfile(os.path.join(candidate, "dbt_project.yml")):
            return candidate
    raise FileNotFoundError("dbt-paimon's macros (dbt_project.yml) are missing from the installation")


__all__ = ["PaimonAdapter", "PaimonAdapterResponse", "PaimonConnectionManager", "PaimonCredentials",
           "PaimonRelation", "PROJECT_NAME", "macros_path"]
