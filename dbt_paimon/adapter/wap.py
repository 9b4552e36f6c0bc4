"""Write, audit, publish: a dbt build writes its Paimon tables on a branch, tests them there, and main
gets them only when everything passed.

    dbt build --vars '{paimon_branch: audit_0412}'
    on-run-end: "{% do paimon_publish(results) %}"            (dbt_project.yml)

With `paimon_branch` given on the command line, every Paimon model, seed and snapshot is written into
that branch of its table (store/snapshot/branches.py), made from main's latest snapshot where it does
not exist; a table new in this build is made on main with its schema and no rows, its rows on the
branch. Every query of the session reads a table that has the branch from it (sql/branch.py), so
`ref()`, tests, `dbt show` and the model's own `{{ this }}` see what the build wrote, and every Spark
SQL statement of it (hooks, run_query) writes that branch (sql/session.py); main is not written.
A `table` model, a seed or a --full-refresh on the branch overwrites the branch's rows (its columns
follow the model's; its keys cannot change there).

`paimon_publish(results)` then fast-forwards main of every table the build wrote to its branch and
deletes the branch, unless a node of the build erred, failed or was skipped: then nothing is
published and every branch stays for inspection. Paimon has no commit across tables: while a publish
runs, a reader sees some tables published and others not yet; each table is either before or after.
A publish that stopped halfway is finished by running it again: `dbt run-operation paimon_publish
--args '{branch: NAME}'` publishes every Paimon table of the warehouse that has the branch.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from .. import key_index
from ..engine import OVERWRITE_TABLE, Replace
from ..store import BranchError, FileIO, FileStoreTable, PaimonError, check_branch_name
from .incremental import Write
from .maintenance import int_arg, open_table, operation_failed
from .tables import Tables

log = AdapterLogger("Paimon")

BRANCH_VAR = "paimon_branch"


def build_branch(cli_vars: Optional[Mapping[str, Any]]) -> Optional[str]:
    """The branch this dbt invocation writes on (`--vars '{paimon_branch: NAME}'`), checked."""
    value = (cli_vars or {}).get(BRANCH_VAR)
    if value is None or str(value).strip() == "":
        return None
    try:
        return check_branch_name(str(value))
    except BranchError as e:
        raise DbtRuntimeError(f"--vars {BRANCH_VAR}: {e}") from None


def rebuilt_on_branch(write: Write, keyed: bool) -> Write:
    """A rebuild (`table`, seed, --full-refresh) of an existing table on the branch: every row of
    the branch replaced by the model's, in one snapshot."""
    if keyed:
        return dataclasses.replace(write, replace=Replace(where="true", what="the whole table (a rebuild)"))
    return dataclasses.replace(write, mode=OVERWRITE_TABLE)


def _warehouse_tables(tables: Tables) -> List[tuple[str, str]]:
    """(schema, table) of every Paimon table of the warehouse (a local one, or listed from the store)."""
    io = FileIO.get(tables.warehouse)
    found = []
    for schema_dir in sorted(io.list_names(tables.warehouse)):
        if not schema_dir.endswith(".db"):
            continue
        for name in sorted(io.list_names(f"{tables.warehouse}/{schema_dir}")):
            found.append((schema_dir[:-3], name))
    return found


def publish(tables: Tables, branch: Any, written: Optional[Sequence[str]], failed: Sequence[str]) -> Dict[str, Any]:
    """Fast-forward main to `branch` for each table of `written` ('schema.table'; None: every table
    of the warehouse that has the branch), then delete the branch; nothing when `failed` names nodes.
    Returns {"published": [...], "message": ...} for the calling macro."""
    branch = build_branch({BRANCH_VAR: branch})
    if branch is None:
        return {"published": [], "message": "paimon_publish: no branch (give --vars '{paimon_branch: NAME}')"}
    if failed:
        shown = ", ".join(list(failed)[:5]) + (f" and {len(failed) - 5} more" if len(failed) > 5 else "")
        message = (f"paimon_publish: nothing published to main: {len(failed)} node(s) did not pass ({shown}); "
                   f"branch '{branch}' stays for inspection")
        log.warning(message)  # a warning, not the report's info line (paimon__report skips it: said once)
        return {"published": [], "message": message, "warned": True}
    names = [tuple(n.split(".", 1)) for n in written] if written is not None else _warehouse_tables(tables)
    published, refused = [], []
    for schema, name in dict.fromkeys(names):  # once each, in the build's order
        relation = tables.Relation.create(schema=schema, identifier=name, type="table")
        path = tables.path(relation)
        io = FileIO.get(path)
        if not FileStoreTable.exists(path, io):
            continue
        table = FileStoreTable.open(path, io)
        if not table.branches.exists(branch):
            continue  # not written by this build, or published by an earlier run of this publish
        try:
            copied = _fast_forward(table, path, branch)
            _delete_branch(table, path, branch)
        except PaimonError as e:
            refused.append(f"{schema}.{name}: {e}")
            continue
        tables.resync(relation, path)
        published.append(f"{schema}.{name}" + (f" (snapshots {copied[0]}..{copied[-1]})" if copied else ""))
    if refused:
        raise DbtRuntimeError(f"paimon_publish of branch '{branch}': {len(refused)} table(s) not published: "
                              + "; ".join(refused) + (f". Published: {', '.join(published)}" if published else ""))
    message = (f"paimon_publish: main of {len(published)} table(s) now holds branch '{branch}'"
               + (f": {', '.join(published)}" if published else ""))
    return {"published": published, "message": message}



def _fast_forward(table: FileStoreTable, path: str, branch: str) -> List[int]:
    """Main fast-forwarded to `branch`, and the branch's key index made main's (key_index/branches.py):
    main's next upsert then finds its index caught up. The snapshots copied."""
    copied = table.fast_forward(branch)
    try:
        key_index.publish_branch(table.io, path, FileStoreTable.open(path, table.io).schema, branch)
    except (OSError, ValueError) as e:  # main is published; its index catches up on its next upsert
        log.warning(f"key index of {path} not carried over from branch '{branch}' ({e}): rebuilt as needed")
    return copied


def _delete_branch(table: FileStoreTable, path: str, branch: str) -> None:
    table.delete_branch(branch)
    try:
        key_index.drop_branch(table.io, path, branch)
    except OSError as e:  # what is left only keeps runs alive; the next delete of the name removes it
        log.warning(f"key index of {path}: branch '{branch}''s versions not removed ({e})")


# ---- run-operations on one table's branches (macros/maintenance.sql) ---------------------------------

def _branch_arg(operation: str, branch: Any) -> str:
    if branch is None or not str(branch).strip():
        raise DbtRuntimeError(f"{operation}: give the branch's name as branch")
    return str(branch).strip()


def create_branch(tables: Tables, relation: Any, branch: Any, tag: Any = None,
                  snapshot_id: Any = None) -> Dict[str, Any]:
    """A branch of the table: from `tag`, from `snapshot_id`, or from main's latest snapshot."""
    op = "paimon_create_branch"
    name = _branch_arg(op, branch)
    sid = int_arg(op, "snapshot_id", snapshot_id, 1)
    tag = str(tag).strip() if tag is not None and str(tag).strip() else None
    rel, path, table = open_table(tables, relation, op)
    if sid is None and tag is None:
        sid = table.snapshots.latest_id()
    try:
        made = table.create_branch(name, tag=tag, snapshot_id=sid if tag is None else None)
    except Exception as e:  # noqa: BLE001 - any failure: the run-operation's error names the relation
        raise operation_failed(op, rel, e, "no branch was made") from e
    source = f"tag '{tag}'" if tag else (f"snapshot {sid}" if sid else "nothing (empty)")
    return {"operation": "create_branch", "relation": f"{rel.schema}.{rel.identifier}", "branch": name,
            "snapshot_id": made.snapshots.latest_id(),
            "message": f"BRANCH {rel.schema}.{rel.identifier}: branch '{name}' made from {source}"}


def fast_forward(tables: Tables, relation: Any, branch: Any) -> Dict[str, Any]:
    op = "paimon_fast_forward"
    name = _branch_arg(op, branch)
    rel, path, table = open_table(tables, relation, op)
    try:
        copied = _fast_forward(table, path, name)
    except Exception as e:  # noqa: BLE001 - any failure: the run-operation's error names the relation
        raise operation_failed(op, rel, e, "main is as it was") from e
    tables.resync(rel, path)
    done = f"snapshots {copied[0]}..{copied[-1]} published" if copied else "main holds the branch already"
    return {"operation": "fast_forward", "relation": f"{rel.schema}.{rel.identifier}", "branch": name,
            "copied": copied, "message": f"FAST-FORWARD {rel.schema}.{rel.identifier} to '{name}': {done}"}


def delete_branch(tables: Tables, relation: Any, branch: Any) -> Dict[str, Any]:
    op = "paimon_delete_branch"
    name = _branch_arg(op, branch)
    rel, path, table = open_table(tables, relation, op)
    try:
        _delete_branch(table, path, name)
    except Exception as e:  # noqa: BLE001 - any failure: the run-operation's error names the relation
        raise operation_failed(op, rel, e, "nothing was deleted") from e
    return {"operation": "delete_branch", "relation": f"{rel.schema}.{rel.identifier}", "branch": name,
            "message": f"DELETE BRANCH {rel.schema}.{rel.identifier}: branch '{name}' deleted (its data files "
                       "go with remove_orphan_files)"}
