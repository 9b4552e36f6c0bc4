"""What a SQL statement changes in Spark's catalog, read from its text before it runs.

dbt-spark's macros, seeds and hooks reach Spark's catalog only through SQL statements on the session
cursor. To keep the catalog of Spark's own relations where every dbt process finds it
(spark_relations.py), and to let one process at a time write a relation (locks.py), the cursor
needs to know which relation a statement writes before it runs it. dbt renders relations as
`schema.name` (backquoted or not) after an optional query comment, so the head of the statement
says it; a statement this cannot read is reported as `unknown` and the caller compares the whole
catalog instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Optional, Union

_IDENT = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_]+)"
_NAME = rf"({_IDENT}(?:\s*\.\s*{_IDENT}){{0,2}})"
_LEADING_NOISE = re.compile(r"^(?:\s+|/\*.*?\*/|--[^\n]*(?:\n|$))+", re.DOTALL)

_RELATION_WRITES = [  # (pattern, what) in the order tried; the name is group 1
    (r"create\s+(?:or\s+replace\s+)?(?:global\s+)?(?:temporary|temp)\s+view\b", None),  # session-only
    (rf"create\s+(?:or\s+replace\s+)?view\s+(?:if\s+not\s+exists\s+)?{_NAME}", "view"),
    (rf"create\s+(?:or\s+replace\s+)?(?:external\s+)?table\s+(?:if\s+not\s+exists\s+)?{_NAME}", "table"),
    (rf"replace\s+table\s+{_NAME}", "table"),
    (rf"drop\s+(?:table|view)\s+(?:if\s+exists\s+)?{_NAME}", "drop"),
    (rf"alter\s+(?:table|view)\s+{_NAME}", "alter"),
    (rf"insert\s+(?:into|overwrite)\s+(?:table\s+)?{_NAME}", "data"),
    (rf"truncate\s+table\s+{_NAME}", "data"),
    (rf"(?:merge\s+into|update|delete\s+from)\s+{_NAME}", "data"),
    (rf"comment\s+on\s+(?:table|view)\s+{_NAME}", "alter"),
    (rf"msck\s+repair\s+table\s+{_NAME}", "alter"),
]
_RENAME = re.compile(rf"alter\s+(?:table|view)\s+{_NAME}\s+rename\s+to\s+{_NAME}", re.IGNORECASE)
_SCHEMA = re.compile(rf"(create|drop)\s+(?:schema|database|namespace)\s+(?:if\s+(?:not\s+)?exists\s+)?{_NAME}",
                     re.IGNORECASE)
_LIST = re.compile(rf"show\s+(?:table\s+extended|tables|views)\s+(?:in|from)\s+{_NAME}", re.IGNORECASE)
# Statements that may change the catalog but that the patterns above do not read
_DDL = re.compile(r"(?:create|drop|alter|replace|comment|msck|truncate|insert|merge|update|delete)\b"
                  r".{0,200}?\b(?:table|view|into)\b",
                  re.IGNORECASE | re.DOTALL)
_COMPILED = [(re.compile(p, re.IGNORECASE), what) for p, what in _RELATION_WRITES]


def _unquote(part: str) -> str:
    part = part.strip()
    if part.startswith("`") and part.endswith("`"):
        return part[1:-1].replace("``", "`")
    return part


def _parts(name: str) -> list[str]:
    return [_unquote(p) for p in re.findall(_IDENT, name)]


Schema = Union[str, Callable[[], str]]  # the current schema, or how to ask for it (a Spark call)


def split_name(name: str, current_schema: Schema) -> Optional[tuple[str, str]]:
    """(schema, name), lower case as Spark's session catalog keeps them; None for another catalog's."""
    parts = _parts(name)
    if len(parts) == 3:
        if parts[0].lower() != "spark_catalog":
            return None
        parts = parts[1:]
    if len(parts) == 1:
        parts = [current_schema() if callable(current_schema) else current_schema, parts[0]]
    return parts[0].lower(), parts[1].lower()


@dataclass
class Statement:
    """What one statement writes: relations (schema, name) and their kind of change, schemas."""

    relations: list = field(default_factory=list)  # [(schema, name)]
    kind: Optional[str] = None  # view, table, drop, alter, data, rename
    schema_change: Optional[tuple[str, str]] = None  # ("create" | "drop", schema)
    listed_schema: Optional[str] = None  # SHOW TABLES IN <schema>: dbt lists a schema's relations
    unknown: bool = False  # changes the catalog in a way not read here
    bare_names: list = field(default_factory=list)  # names given without a schema: maybe a temporary view

    @property
    def writes(self) -> bool:
        return bool(self.relations)


_QUALIFIED = re.compile(rf"(?<![\w`.])({_IDENT}\s*\.\s*{_IDENT}(?:\s*\.\s*{_IDENT})?)")


def qualified_names(sql: str) -> set[tuple[str, str]]:
    """Every `schema.name` (or `spark_catalog.schema.name`) the text mentions, lower case."""
    found = set()
    for match in _QUALIFIED.findall(sql):
        name = split_name(match, "")
        if name and name[0]:
            found.add(name)
    return found


def schema_name(name: str) -> Optional[str]:
    """A schema's name in the session catalog (lower case); None for another catalog's."""
    parts = _parts(name)
    if len(parts) == 2 and parts[0].lower() != "spark_catalog":
        return None
    return parts[-1].lower()


_METADATA = re.compile(r"(?:describe|desc|show|explain)\b", re.IGNORECASE)


def is_metadata(sql: str) -> bool:
    """A statement that reads the catalog only, not a table's files."""
    return bool(_METADATA.match(head(sql)))


def head(sql: str) -> str:
    return _LEADING_NOISE.sub("", sql, count=1)


def parse(sql: str, current_schema: Schema = "default") -> Statement:
    text = head(sql)
    rename = _RENAME.match(text)
    if rename:
        names = [split_name(rename.group(1), current_schema), split_name(rename.group(2), current_schema)]
        return Statement(relations=[n for n in names if n], kind="rename")
    for pattern, what in _COMPILED:
        m = pattern.match(text)
        if m:
            if what is None:
                return Statement()
            name = split_name(m.group(1), current_schema)
            bare = [_parts(m.group(1))[0].lower()] if len(_parts(m.group(1))) == 1 else []
            return Statement(relations=[name] if name else [], kind=what, bare_names=bare)
    schema = _SCHEMA.match(text)
    if schema:
        name = schema_name(schema.group(2))
        return Statement(schema_change=(schema.group(1).lower(), name) if name else None)
    listed = _LIST.match(text)
    if listed:
        return Statement(listed_schema=schema_name(listed.group(1)))
    return Statement(unknown=bool(_DDL.match(text)))
