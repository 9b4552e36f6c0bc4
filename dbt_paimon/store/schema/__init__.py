"""A table's schema as Paimon keeps it: `TableSchema` and its schema files (`SchemaManager`), which
options a table may have and their values, statistics modes, foreign options, merge-engine options."""
