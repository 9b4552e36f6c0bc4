"""Errors raised by the table store. Each names the problem in words a dbt user can act on."""


class PaimonError(Exception):
    """Base class of every error dbt-paimon raises on purpose."""


class SchemaError(PaimonError):
    """A schema, type or option that Paimon (or we) cannot accept."""


class TableNotFoundError(PaimonError):
    """A path that holds no Paimon table."""


class CorruptTableError(PaimonError):
    """Metadata that is missing, unreadable or of a version we do not support."""


class CommitConflictError(PaimonError):
    """A commit that cannot apply on top of the latest snapshot."""


class CommitRetriesExhaustedError(CommitConflictError):
    """A commit that lost the race for the next snapshot commit.max-retries times: its retries are
    spent (a job that runs in a commit loop does not try again)."""


class DataError(PaimonError):
    """Input rows that cannot be written: null keys, duplicate keys, wrong types."""


class InvalidNameError(PaimonError):
    """A database, table or tag name that cannot be one plain name inside the warehouse."""
