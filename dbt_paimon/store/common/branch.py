"""Where a branch's metadata lives, and which branch names are allowed (Paimon's BranchManager rules).

A branch is a table's own line of snapshots, schemas, tags and consumers beside `main`, kept under
`<table>/branch/branch-<name>/` (main's are in the table's root). Manifests, index files and data
files stay in the table's root for every branch: a branch's snapshots name files in `manifest/`.
"""

from __future__ import annotations

import re

from .errors import PaimonError

MAIN = "main"
BRANCH_DIR = "branch"
BRANCH_PREFIX = "branch-"
# Paimon refuses 'main', blank and all-digit names. A name also becomes a directory and the suffix of
# `t$branch_<name>` in SQL, so it keeps to letters, digits, '_', '-' and '.' (not first).
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")


class BranchError(PaimonError):
    """A branch operation refused: a bad or unknown name, or a fast-forward that would lose commits."""


def normalize(branch: str | None) -> str:
    """None or blank means main, as in Paimon."""
    return MAIN if branch is None or not str(branch).strip() else str(branch).strip()


def is_main(branch: str | None) -> bool:
    return normalize(branch) == MAIN


def branch_root(table_path: str, branch: str | None) -> str:
    """The directory holding `snapshot/`, `schema/`, `tag/` and `consumer/` of a branch. Any name
    that stays one directory inside the table is accepted (another writer's branch may have a name
    check_name refuses for new branches)."""
    root = table_path.rstrip("/")
    if is_main(branch):
        return root
    name = str(branch)
    if "/" in name or "\\" in name or "\0" in name or name.strip(".") == "":
        raise BranchError(f"Branch name {name!r} is not a name: it would leave the table's directory")
    return f"{root}/{BRANCH_DIR}/{BRANCH_PREFIX}{name}"


def check_name(name: str) -> str:
    """A name a new or existing branch may have, in Paimon's words where Paimon refuses it too."""
    if not isinstance(name, str):
        raise BranchError(f"Branch name must be a string, not {type(name).__name__}: {name!r}")
    if name.strip().lower() == MAIN:
        raise BranchError(f"Branch name '{name}' is the default branch and cannot be used.")
    if not name.strip():
        raise BranchError(f"Branch name '{name}' is blank.")
    if name.isdigit():
        raise BranchError(f"Branch name cannot be pure numeric string but is '{name}'.")
    if not _NAME.fullmatch(name):
        raise BranchError(f"Branch name '{name}' may hold only letters, digits, '_', '-' and '.' (not first): "
                          "it names a directory and follows '$branch_' in a table name")
    return name

