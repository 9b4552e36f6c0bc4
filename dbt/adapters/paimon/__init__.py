"""dbt's entry point for `type: paimon` (dbt imports dbt.adapters.<type> and reads `Plugin`)."""

from dbt.adapters.base import AdapterPlugin

from dbt_paimon.adapter import (PROJECT_NAME, PaimonAdapter, PaimonConnectionManager, PaimonCredentials,
                                PaimonRelation, macros_path)

Plugin = AdapterPlugin(
    adapter=PaimonAdapter,  # type: ignore[arg-type]
    credentials=PaimonCredentials,
    include_path=macros_path(),
    dependencies=["spark"],
    project_name=PROJECT_NAME,
)

__all__ = ["Plugin", "PaimonAdapter", "PaimonConnectionManager", "PaimonCredentials", "PaimonRelation"]
