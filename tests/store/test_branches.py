"""Branches in the store: made, written, read, fast-forwarded and deleted as Paimon lays them out,
and every maintenance operation keeping the files a branch holds.

Tables are written by our FileStoreTable; main's metadata files are hashed before an operation on a
branch and compared after, so "main untouched" means byte for byte. pypaimon 2.1 reads branches and
fast-forwarded mains as a second reader.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pytest

from dbt_paimon.store import FileStoreTable, PaimonError
from dbt_paimon.store.common.branch import BranchError
from dbt_paimon.store import system_tables
from tests.oracle import pypaimon_table, rows
from tests.store.test_orphan_files import age_everything, contents

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])
KEY = ["id", "dt"]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write(t: FileStoreTable, items: list[tuple[int, str]], deletes: list[tuple[int, str]] = ()) -> int:
    w = t.new_write()
    batch = pa.Table.from_pylist([{"id": i, "dt": f"d{i % 2}", "v": v} for i, v in items]
                                 + [{"id": i, "dt": f"d{i % 2}", "v": v} for i, v in deletes], SCHEMA)
    w.write(batch, row_kinds=[0] * len(items) + [3] * len(deletes))
    result = w.commit()
    time.sleep(0.003)  # distinct snapshot times
    return result.snapshot.id


def read(path: str, branch: str | None = None, **kw) -> list[dict]:
    return rows(FileStoreTable.open(path, branch=branch).to_arrow(**kw), KEY)


def main_metadata(path: str) -> dict[str, str]:
    """main's own metadata files (snapshot, schema, tag, consumer dirs) -> their hashes."""
    return {p: h for p, h in contents(path).items()
            if p[len(path) + 1:].split("/", 1)[0] in ("snapshot", "schema", "tag", "consumer")}


@pytest.fixture
def table(table_path):
    t = FileStoreTable.create(table_path, SCHEMA, KEY, ["dt"], {"bucket": "2"})
    write(t, [(1, "a"), (2, "b")])
    write(t, [(3, "c"), (1, "a2")])
    return FileStoreTable.open(table_path)


def test_a_branch_made_from_a_snapshot_reads_it_and_takes_writes_while_main_stays(table):
    path = table.path
    before = main_metadata(path)
    at_2 = read(path)
    b = table.create_branch("audit", snapshot_id=2)
    assert b.branch == "audit" and table.list_branches() == ["audit"]
    assert os.path.isfile(f"{path}/branch/branch-audit/snapshot/snapshot-2")
    assert sorted(os.listdir(f"{path}/branch/branch-audit/schema")) == ["schema-0"]
    assert read(path, "audit") == at_2
    sid = write(b, [(4, "d")], deletes=[(2, "b")])
    assert sid == 3 and FileStoreTable.open(path, branch="audit").snapshots.latest_id() == 3
    assert [r["id"] for r in read(path, "audit")] == [1, 3, 4]
    assert read(path) == at_2 and main_metadata(path) == before
    branch_read = pypaimon_table(path).copy({"branch": "audit"})
    rb = branch_read.new_read_builder()
    assert rows(rb.new_read().to_arrow(rb.new_scan().plan().splits()), KEY) == read(path, "audit")


def test_a_branch_from_a_tag_or_empty_as_paimon_makes_them(table):
    path = table.path
    table.create_tag("t1", snapshot_id=1)
    table.create_branch("from_tag", tag="t1")
    assert os.path.isfile(f"{path}/branch/branch-from_tag/tag/tag-t1")
    assert os.path.isfile(f"{path}/branch/branch-from_tag/snapshot/snapshot-1")
    assert read(path, "from_tag") == read(path, snapshot_id=1)
    empty = table.create_branch("empty")
    assert read(path, "empty") == [] and empty.snapshots.latest_id() is None
    assert write(empty, [(9, "z")]) == 1  # an empty branch's first commit is its snapshot 1
    assert [r["id"] for r in read(path, "empty")] == [9]
    names = system_tables.read(table, "branches").column("branch_name").to_pylist()
    assert names == ["empty", "from_tag"]


@pytest.mark.parametrize("name, message", [
    ("main", "is the default branch"), ("MAIN", "is the default branch"), ("", "is blank"),
    ("  ", "is blank"), ("10", "pure numeric"), ("a/b", "letters, digits"), ("..", "letters, digits"),
    ("x$y", "letters, digits"), (".hidden", "letters, digits"),
])
def test_bad_branch_names_are_refused_by_name_and_nothing_is_made(table, name, message):
    with pytest.raises(BranchError, match=message):
        table.create_branch(name)
    assert not os.path.exists(f"{table.path}/branch")


def test_creating_refuses_what_does_not_exist_and_a_second_creation(table):
    with pytest.raises(BranchError, match="Tag 'nope' doesn't exist."):
        table.create_branch("b", tag="nope")
    with pytest.raises(BranchError, match=r"snapshot 9 of main: it does not exist \(snapshots 1..2\)"):
        table.create_branch("b", snapshot_id=9)
    assert table.list_branches() == []
    table.create_branch("b", snapshot_id=1)
    with pytest.raises(BranchError, match="Branch name 'b' already exists."):
        table.create_branch("b")
    assert table.create_branch("b", snapshot_id=2, ignore_if_exists=True).snapshots.latest_id() == 1
    with pytest.raises(BranchError, match="Branch name 'other' doesn't exist."):
        table.fast_forward("other")
    with pytest.raises(PaimonError, match="branch 'other' of .* does not exist"):
        FileStoreTable.open(table.path, branch="other")


def test_fast_forward_publishes_the_branch_and_a_second_one_changes_nothing(table):
    path = table.path
    b = table.create_branch("wap", snapshot_id=table.snapshots.latest_id())
    write(b, [(5, "e")])
    write(b, [(6, "f")], deletes=[(1, "a2")])
    b.create_tag("audited")
    expected = read(path, "wap")
    assert table.fast_forward("wap") == [3, 4]
    assert read(path) == expected and table.snapshots.latest_id() == 4
    with open(f"{path}/snapshot/LATEST") as f:
        assert f.read().strip() == "4"
    assert [t.name for t in table.list_tags()] == ["audited"]
    pp = pypaimon_table(path).new_read_builder()
    assert rows(pp.new_read().to_arrow(pp.new_scan().plan().splits()), KEY) == expected
    after = main_metadata(path)
    assert table.fast_forward("wap") == [] and main_metadata(path) == after
    # main goes on from the published branch
    write(FileStoreTable.open(path), [(7, "g")])
    assert [r["id"] for r in read(path)] == [2, 3, 5, 6, 7]


def test_fast_forward_refuses_when_main_moved_on_and_changes_nothing(table):
    path = table.path
    b = table.create_branch("wap", snapshot_id=2)
    write(b, [(5, "e")])
    write(FileStoreTable.open(path), [(8, "h")])  # main commits snapshot 3 meanwhile
    before = main_metadata(path)
    with pytest.raises(BranchError, match="main committed snapshot 3 after the branch was made"):
        table.fast_forward("wap")
    assert main_metadata(path) == before
    empty = table.create_branch("empty")
    write(empty, [(9, "z")])
    with pytest.raises(BranchError, match="main is at snapshot 3, past the branch.s latest 1"):
        table.fast_forward("empty")
    with pytest.raises(BranchError, match="do not use in fast-forward"):
        table.fast_forward("main")
    with pytest.raises(BranchError, match="does not have snapshot"):
        table.create_branch("nothing")
        table.fast_forward("nothing")


def test_a_schema_change_on_the_branch_is_published_with_it(table):
    path = table.path
    b = table.create_branch("wap", snapshot_id=2)
    b.alter_options({"snapshot.num-retained.max": "50"})
    write(FileStoreTable.open(path, branch="wap"), [(5, "e")])
    assert FileStoreTable.open(path).schema.id == 0
    table.fast_forward("wap")
    published = FileStoreTable.open(path)
    assert published.schema.id == 1 and published.schema.options["snapshot.num-retained.max"] == "50"
    assert read(path) == read(path, "wap")


_KILLED_FF = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {repo!r})
    from dbt_paimon.store import FileStoreTable
    from dbt_paimon.store.common.fileio import LocalFileIO

    class Killing(LocalFileIO):
        writes = 0
        def _count(self):
            Killing.writes += 1
            if Killing.writes > {after}:
                os.kill(os.getpid(), signal.SIGKILL)
        def write_exclusive(self, path, text):
            self._count()
            return super().write_exclusive(path, text)
        def overwrite_text(self, path, text):
            self._count()
            return super().overwrite_text(path, text)

    FileStoreTable.open({path!r}, Killing()).fast_forward("wap")
""")


def test_a_kill_during_fast_forward_leaves_main_before_or_after_and_a_rerun_completes(table):
    path = table.path
    b = table.create_branch("wap", snapshot_id=2)
    b.alter_options({"snapshot.num-retained.max": "50"})
    for i in range(3):
        write(FileStoreTable.open(path, branch="wap"), [(10 + i, f"n{i}")])
    FileStoreTable.open(path, branch="wap").create_tag("done")
    before, after = read(path), read(path, "wap")
    states = []
    for after_writes in range(7):  # a schema, three snapshots, the hint, a tag: 6 writes
        copy = f"{path}_{after_writes}"
        shutil.copytree(path, copy)
        code = subprocess.run([sys.executable, "-c", _KILLED_FF.format(repo=REPO, path=copy, after=after_writes)],
                              capture_output=True, text=True, timeout=120)
        killed = code.returncode == -signal.SIGKILL
        assert killed or code.returncode == 0, code.stderr
        now = read(copy)
        assert now in (before, after), f"killed after {after_writes} writes: main reads neither before nor after"
        states.append(("after" if now == after else "before") if killed else "done")
        FileStoreTable.open(copy).fast_forward("wap")  # the re-run completes it
        assert read(copy) == after and [t.name for t in FileStoreTable.open(copy).list_tags()] == ["done"]
    assert states == ["before"] * 4 + ["after"] * 2 + ["done"], states


def test_delete_branch_removes_its_metadata_and_orphan_clean_its_files(table):
    path = table.path
    existing = set(contents(path))
    b = table.create_branch("gone", snapshot_id=2)
    write(b, [(50, "x")])
    branch_only = {p for p in set(contents(path)) - existing if "/branch/" not in p}
    age_everything(path)
    assert table.remove_orphan_files().paths == []  # the branch's files are used
    table.delete_branch("gone")
    assert not os.path.exists(f"{path}/branch/branch-gone") and table.list_branches() == []
    age_everything(path)
    removed = table.remove_orphan_files().paths
    assert set(removed) == branch_only and any("bucket-" in p for p in removed)  # its data file, manifests
    assert read(path) == rows(FileStoreTable.open(path).to_arrow(), KEY)
    with pytest.raises(BranchError, match="Branch name 'gone' doesn't exist."):
        table.delete_branch("gone")


def test_rollback_expiration_and_tag_deletion_on_main_keep_what_a_branch_holds(table):
    path = table.path
    main = FileStoreTable.open(path)
    write(main, [(4, "d")], deletes=[(2, "b")])
    write(main, [(5, "e")])
    main.create_tag("base", snapshot_id=4)
    write(main.create_branch("late", tag="base"), [(60, "y")])
    main.create_tag("t2", snapshot_id=2)
    write(main.create_branch("early", snapshot_id=2), [(61, "z")])
    expected = {b: read(path, b) for b in ("late", "early")}
    main.rollback_to(2)  # snapshots 3 and 4, the tag on 4 and what only they referenced go
    assert not os.path.exists(f"{path}/snapshot/snapshot-4") and main.list_tags()[0].name == "t2"
    for i in range(6):
        write(main, [(1, f"u{i}"), (3, f"w{i}")], deletes=[(2, "b")] if i == 0 else [])
    assert main.expire_snapshots(retain_max=1, retain_min=1).expired
    assert not os.path.exists(f"{path}/snapshot/snapshot-2")
    assert main.delete_tag("t2")  # snapshot 2 expired: the tag's own files go, unless a branch holds them
    for branch, want in expected.items():
        assert read(path, branch) == want, branch
        pp = pypaimon_table(path).copy({"branch": branch}).new_read_builder()
        assert rows(pp.new_read().to_arrow(pp.new_scan().plan().splits()), KEY) == want, branch


def test_a_branch_directory_without_schema_stops_cleaning_before_anything_is_deleted(table):
    path = table.path
    os.makedirs(f"{path}/branch/branch-half/snapshot")
    age_everything(path)
    with pytest.raises(PaimonError, match=r"Branches \['half'\] have no schemas"):
        table.remove_orphan_files()
    assert table.list_branches() == []


def test_consumers_and_tags_of_a_branch_are_its_own(table):
    path = table.path
    b = table.create_branch("c", snapshot_id=2)
    b.reset_consumer("job", 2)
    b.create_tag("only-here")
    assert FileStoreTable.open(path).consumers() == {} and table.list_tags() == []
    assert b.consumers() == {"job": 2} and [t.name for t in b.list_tags()] == ["only-here"]
    assert os.path.isfile(f"{path}/branch/branch-c/consumer/consumer-job")


def test_a_commit_to_main_racing_a_fast_forward_wins_and_the_fast_forward_takes_its_copies_back(table):
    from dbt_paimon.store.common.fileio import LocalFileIO

    path = table.path
    b = table.create_branch("wap", snapshot_id=2)
    write(b, [(5, "e")])
    write(FileStoreTable.open(path, branch="wap"), [(6, "f")])  # branch snapshots 3, 4

    class Racing(LocalFileIO):
        """Before the fast-forward's last copy (main's snapshot 3), another writer commits snapshot 3."""

        def write_exclusive(self, target, text):
            if target == f"{path}/snapshot/snapshot-3":
                write(FileStoreTable.open(path), [(9, "z")])
            return super().write_exclusive(target, text)

    with pytest.raises(BranchError, match="main committed snapshot 3 while fast-forwarding; nothing was published"):
        FileStoreTable.open(path, Racing()).fast_forward("wap")
    main = FileStoreTable.open(path)
    assert main.snapshots.ids() == [1, 2, 3] and main.snapshots.latest_id() == 3
    assert [r["id"] for r in read(path)] == [1, 2, 3, 9]  # the racing commit, and nothing of the branch
    write(main, [(10, "y")])  # main goes on: its snapshot 4 is its own, not the branch's copy
    assert [r["id"] for r in read(path)] == [1, 2, 3, 9, 10]
