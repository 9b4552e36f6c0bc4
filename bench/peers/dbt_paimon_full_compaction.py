"""The dbt-paimon engine on a table with `full-compaction.delta-commits: 1` (Paimon's own option):
every upsert ends in a full compaction of the table's buckets, each left one file with no level-0
files beside it. That is the layout Iceberg's copy-on-write MERGE writes, and what the read bench's
`compacted` state reads (bench/format_read_bench.py): reads with nothing to merge or leave out, paid
for at write time. Reported beside the default (merge on read: level-0 files, merged when read) so
that the write cost of the read-optimised layout is measured on the same data, in the same run, against
the Spark formats' MERGE (copy-on-write and merge-on-read alike)."""

from peers.dbt_paimon_engine import TABLE_OPTIONS
from peers.dbt_paimon_engine import Peer as EnginePeer


class Peer(EnginePeer):
    label = "dbt-paimon engine (full-compaction.delta-commits 1)"
    note = ("same table and session as dbt-paimon, with full-compaction.delta-commits 1: each upsert ends in a "
            "full compaction of every bucket (Paimon's copy-on-write layout)")
    table_options = {**TABLE_OPTIONS, "full-compaction.delta-commits": "1"}
