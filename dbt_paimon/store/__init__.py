"""The Paimon table format in pure Python (pyarrow + fastavro). Knows nothing of Spark or dbt."""

from .errors import (CommitConflictError, CorruptTableError, DataError, InvalidNameError, PaimonError,
                     SchemaError, TableNotFoundError)
from . import object_store  # noqa: F401 (registers the object-store FileIO with FileIO.get)
from .schema import TableSchema
from .snapshot import Snapshot
from .table import FileStoreTable, TableWrite

__all__ = [
    "CommitConflictError", "CorruptTableError", "DataError", "FileStoreTable", "InvalidNameError", "PaimonError",
    "SchemaError", "Snapshot", "TableNotFoundError", "TableSchema", "TableWrite",
]
