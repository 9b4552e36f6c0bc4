"""The dbt-paimon engine forced onto its Spark job (execution="distributed"): the five-stage
topology (bootstrap, shuffle by key, assign, shuffle by (partition, bucket), write) that a
cluster master always runs. Reported beside the default (auto) so that the figure of the
distributed path, and its stage profile, stay visible on a local machine."""

from peers.dbt_paimon_engine import Peer as EnginePeer


class Peer(EnginePeer):
    label = "dbt-paimon engine (distributed)"
    note = "same table and session as dbt-paimon, execution='distributed': the Spark job as on a cluster"
    execution = "distributed"
