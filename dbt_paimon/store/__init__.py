"""The Paimon table format in pure Python (pyarrow + fastavro). Knows nothing of Spark or dbt.

Its face: a table (`FileStoreTable`), its schema and options, the errors, file IO; and what the
adapter needs of the maintenance and system tables. The subpackages are grouped by Paimon's own
concepts (schema, snapshot, manifest, format, index, merge, read, write, maintenance).
"""

from .common import fileio
from .common.branch import BranchError, check_name as check_branch_name
from .common import object_store  # noqa: F401 (registers the object-store FileIO with FileIO.get)
from .common.errors import (CommitConflictError, CorruptTableError, DataError, InvalidNameError, PaimonError,
                            SchemaError, TableNotFoundError)
from .common.fileio import FileIO
from .clone import clone_table
from .maintenance.orphan_files import older_than_millis
from .common.object_store import copy_tree
from .system_tables import SYSTEM_TABLES
from .common import options
from .schema.option_validation import validate as validate_options
from .common.options import MergeEngine, did_you_mean, parse_duration_ms
from .schema.schema import SchemaManager, TableSchema, resolve_columns
from .common.types import DataType
from .snapshot.consumers import check_id as check_consumer_id
from .snapshot.snapshot import Snapshot
from .table import FileStoreTable
from .write.table_write import TableWrite
from .write.commit import FileStoreCommit

__all__ = [
    "CommitConflictError", "CorruptTableError", "DataError", "FileStoreTable", "InvalidNameError", "PaimonError",
    "SchemaError", "Snapshot", "TableNotFoundError", "TableSchema", "TableWrite",
    # for the adapter
    "fileio", "FileIO", "options", "MergeEngine", "did_you_mean", "parse_duration_ms", "validate_options",
    "SchemaManager", "resolve_columns", "DataType", "FileStoreCommit", "clone_table", "older_than_millis",
    "copy_tree", "SYSTEM_TABLES", "check_consumer_id", "BranchError", "check_branch_name",
]
