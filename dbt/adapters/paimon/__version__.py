# dbt reads the plugin's version here (`dbt --version`); it is written once, in dbt_paimon
from dbt_paimon import __version__ as version

__all__ = ["version"]
