"""Writes: append files, the commit of a snapshot, its conflict checks and the wait between retries,
postpone buckets."""
