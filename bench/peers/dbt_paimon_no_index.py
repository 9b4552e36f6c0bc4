"""The dbt-paimon engine with the key index switched off (RunSettings(key_index=False)): the full
bootstrap, which reads the key of every live row of the table. Reported beside the default so that
the index's gain (issue 14) is measured in the same run, on the same data."""

from peers.dbt_paimon_engine import Peer as EnginePeer


class Peer(EnginePeer):
    label = "dbt-paimon engine (no key index)"
    note = "same table and session as dbt-paimon, key_index=False: every live key of the table read"
    key_index = False
