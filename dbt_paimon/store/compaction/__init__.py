"""Compaction of a bucket: the sorted runs Paimon's universal compaction picks, their merge into one run,
the changelog a compaction derives, and the move of postponed rows into their buckets."""
