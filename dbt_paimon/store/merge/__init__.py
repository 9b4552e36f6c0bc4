"""Merge engines: how the records of one key merge (deduplicate, partial-update, aggregation,
first-row), in sequence order, with sequence groups."""
