"""Tags (Paimon's tag files, read both ways with pypaimon 2.1.0), reading as of a tag, tags protecting
files from expiration, tag deletion and expiry, and rollback to a snapshot or a tag."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest

from dbt_paimon.store import FileStoreTable, PaimonError
from dbt_paimon.store.index.index import load_partition_indexes
from dbt_paimon.store.snapshot.tags import (TagManager, decode_duration, decode_local_datetime, encode_duration,
                                            encode_local_datetime)
from tests.oracle import pypaimon_read, pypaimon_table, rows
from tests.store.test_expire import (COLUMNS, KEY, REPO, Builder, build, copy_of, expire, on_disk, references,
                                     referenced, remaining)


def pypaimon_read_tag(path: str, tag: str):
    """pypaimon's time travel to a tag: the 'scan.tag-name' option."""
    table = pypaimon_table(path).copy({"scan.tag-name": tag})
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits()).select(COLUMNS)


def assert_tag_reads(b: Builder, tag: str, snapshot_id: int, pypaimon: bool = True):
    t = FileStoreTable.open(b.path)
    assert t.tags.get_or_throw(tag).snapshot_id == snapshot_id
    assert rows(t.to_arrow(tag=tag), KEY) == b.expected(snapshot_id), f"tag {tag}"
    if pypaimon:
        assert rows(pypaimon_read_tag(b.path, tag), KEY) == b.expected(snapshot_id), f"pypaimon tag {tag}"


def read_json(path):
    with open(path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    wh = tmp_path_factory.mktemp("whtags")
    os.makedirs(wh / "db.db")
    return {False: build(str(wh), "fixed"), True: build(str(wh), "dynamic", dynamic=True)}


@pytest.fixture
def fixed(bases, warehouse):
    return copy_of(bases[False], warehouse, "t")


# ---- the tag file ------------------------------------------------------------------------------------

def test_java_time_encodings_match_jackson():
    # Paimon's TagTest: LocalDateTime.of(1969, 1, 1, 0, 0, 0, 123456789) and Duration.ofSeconds(5)
    java = ('{"version" : 3, "id" : 0, "schemaId" : 0, "baseManifestList" : null, "deltaManifestList" : null,'
            ' "commitUser" : null, "commitIdentifier" : 0, "commitKind" : "APPEND", "timeMillis" : 1000,'
            ' "totalRecordCount" : 0, "deltaRecordCount" : 0,'
            ' "tagCreateTime" : [ 1969, 1, 1, 0, 0, 0, 123456789 ], "tagTimeRetained" : 5.000000000}')
    tag = TagManager.parse("x", java, "java tag")
    assert tag.create_time == dt.datetime(1969, 1, 1, 0, 0, 0, 123456)
    assert tag.time_retained == dt.timedelta(seconds=5) and tag.snapshot.id == 0
    assert encode_duration(dt.timedelta(seconds=5)) == "5.000000000"
    assert encode_duration(dt.timedelta(hours=1, microseconds=250)) == "3600.000250000"
    # Jackson leaves trailing zero components out
    assert encode_local_datetime(dt.datetime(1969, 1, 1, 0, 0, 0, 123456)) == [1969, 1, 1, 0, 0, 0, 123456000]
    assert encode_local_datetime(dt.datetime(2024, 5, 1, 10, 20)) == [2024, 5, 1, 10, 20]
    assert encode_local_datetime(dt.datetime(2024, 5, 1, 10, 20, 7)) == [2024, 5, 1, 10, 20, 7]
    assert decode_local_datetime([2024, 5, 1, 10, 20], "t") == dt.datetime(2024, 5, 1, 10, 20)
    assert decode_duration(7200.0, "t") == dt.timedelta(hours=2)
    assert decode_duration("PT1H30M", "t") == dt.timedelta(hours=1, minutes=30)
    with pytest.raises(PaimonError):
        decode_duration("soon", "t")


def test_tag_files_in_paimon_format(fixed):
    t = FileStoreTable.open(fixed.path)
    plain = t.create_tag("plain", 5)
    snapshot_json = read_json(f"{fixed.path}/snapshot/snapshot-5")
    # without retention the tag file is the snapshot's JSON, nothing more (readable by Paimon <= 0.7)
    assert read_json(f"{fixed.path}/tag/tag-plain") == snapshot_json
    assert plain.create_time is None and plain.time_retained is None and plain.snapshot == t.snapshots.snapshot(5)
    before = dt.datetime.now()
    timed = t.create_tag("timed", 6, time_retained="1 h")
    text = open(f"{fixed.path}/tag/tag-timed").read()
    fields = json.loads(text)
    assert {k: v for k, v in fields.items() if not k.startswith("tag")} == read_json(
        f"{fixed.path}/snapshot/snapshot-6")
    assert list(fields)[-2:] == ["tagCreateTime", "tagTimeRetained"]
    assert re.search(r'"tagTimeRetained": 3600\.000000000\n}$', text)
    assert isinstance(fields["tagCreateTime"], list) and 5 <= len(fields["tagCreateTime"]) <= 7
    assert before - dt.timedelta(seconds=1) <= timed.create_time <= dt.datetime.now()
    assert timed.time_retained == dt.timedelta(hours=1)
    assert [(x.name, x.snapshot_id) for x in t.list_tags()] == [("plain", 5), ("timed", 6)]
    # the default: the latest snapshot
    assert t.create_tag("now").snapshot_id == 12


def test_pypaimon_reads_our_tags_and_we_read_theirs(fixed):
    t = FileStoreTable.open(fixed.path)
    t.create_tag("ours-3", 3)
    t.create_tag("ours-4", 4, time_retained=dt.timedelta(days=1))
    theirs = pypaimon_table(fixed.path)
    theirs.create_tag("theirs-6", 6)
    theirs.create_tag("theirs-7", 7, time_retained="2h")
    # pypaimon parses our tag fields and time-travels to our tags
    ptags = pypaimon_table(fixed.path).tag_manager()
    ours4 = ptags.get("ours-4")
    assert ours4.tag_time_retained == dt.timedelta(days=1)
    assert ours4.tag_create_time == t.tags.get("ours-4").create_time
    assert ptags.get("ours-3").tag_create_time is None
    assert sorted(pypaimon_table(fixed.path).list_tags()) == ["ours-3", "ours-4", "theirs-6", "theirs-7"]
    for name, sid in (("ours-3", 3), ("ours-4", 4), ("theirs-6", 6), ("theirs-7", 7)):
        assert_tag_reads(fixed, name, sid)
    # we parse theirs
    t7 = t.tags.get("theirs-7")
    assert t7.time_retained == dt.timedelta(hours=2)
    assert t7.create_time == ptags.get("theirs-7").tag_create_time
    assert t.tags.get("theirs-6").snapshot == t.snapshots.snapshot(6)
    # pypaimon deletes our tag, we delete theirs
    assert pypaimon_table(fixed.path).delete_tag("ours-3")
    assert t.delete_tag("theirs-6")
    assert [x.name for x in t.list_tags()] == ["ours-4", "theirs-7"]
    assert sorted(pypaimon_table(fixed.path).list_tags()) == ["ours-4", "theirs-7"]


def test_tag_errors(fixed):
    t = FileStoreTable.open(fixed.path)
    t.create_tag("a", 2)
    with pytest.raises(PaimonError, match="Tag 'a' already exists"):
        t.create_tag("a", 3)
    assert t.create_tag("a", 3, ignore_if_exists=True).snapshot_id == 2
    with pytest.raises(PaimonError, match="shouldn't be blank"):
        t.create_tag("  ")
    with pytest.raises(PaimonError, match="plain file name"):
        t.create_tag("x/y")
    with pytest.raises(PaimonError, match="given snapshot #99 doesn't exist"):
        t.create_tag("b", 99)
    with pytest.raises(PaimonError, match="Tag 'nope' doesn't exist"):
        t.to_arrow(tag="nope")
    with pytest.raises(PaimonError, match="not both"):
        t.plan(snapshot_id=2, tag="a")
    assert t.delete_tag("nope") is False
    assert [x.name for x in t.list_tags()] == ["a"]


# ---- tags and expiration ---------------------------------------------------------------------------

@pytest.mark.parametrize("dynamic", [False, True], ids=["fixed-bucket", "dynamic-bucket"])
def test_tags_protect_their_files_and_deleting_them_frees_the_files(bases, warehouse, dynamic):
    b = copy_of(bases[dynamic], warehouse, "t")
    t = FileStoreTable.open(b.path)
    t.create_tag("t3", 3, time_retained="1d")
    pypaimon_table(b.path).create_tag("t7", 7)  # a tag written by pypaimon protects files too
    t.create_tag("t5a", 5)
    t.create_tag("t5b", 5)
    result = t.expire_snapshots(retain_min=1, retain_max=1, time_retained_ms=0)
    assert result.expired == list(range(1, 12)) and remaining(b) == [12]
    # exactly the files of snapshot 12 and of the tagged snapshots 3, 5, 7 are left
    assert on_disk(b.path) == referenced(b.path)
    tagged = {sid: references(b.path, t.tags.get_or_throw(name).snapshot) for sid, name in ((3, "t3"), (5, "t5a"),
                                                                                              (7, "t7"))}
    assert on_disk(b.path) == references(b.path, t.snapshots.snapshot(12)) | tagged[3] | tagged[5] | tagged[7]
    for name, sid in (("t3", 3), ("t5a", 5), ("t5b", 5), ("t7", 7)):
        assert_tag_reads(b, name, sid, pypaimon=name != "t5b")
    # a tag can be made from an expired snapshot another tag holds
    assert t.create_tag("again3", 3).snapshot == t.tags.get("t3").snapshot
    assert t.delete_tag("again3")

    # one of two tags of snapshot 5 goes: nothing else does
    before = on_disk(b.path)
    assert t.delete_tag("t5a") and on_disk(b.path) == before
    # the last tag of 5 goes: the files only it held go too, the neighbours' stay
    assert t.delete_tag("t5b")
    assert on_disk(b.path) == referenced(b.path) < before
    assert before - on_disk(b.path) == tagged[5] - tagged[3] - tagged[7] - references(b.path, t.snapshots.snapshot(12))
    assert_tag_reads(b, "t3", 3)
    assert_tag_reads(b, "t7", 7)
    assert t.delete_tag("t3") and t.delete_tag("t7")
    assert on_disk(b.path) == references(b.path, t.snapshots.snapshot(12))
    assert rows(pypaimon_read(b.path).select(COLUMNS), KEY) == b.expected(12)


def test_expiration_keeps_files_of_tagged_snapshot_between_expired_ones(fixed):
    """A tag in the middle of the expired range: files deleted after it are kept for it."""
    t = FileStoreTable.open(fixed.path)
    t.create_tag("mid", 6)
    expire(fixed, retain_min=3, time_retained_ms=0)
    assert remaining(fixed) == [10, 11, 12]
    assert on_disk(fixed.path) == referenced(fixed.path)
    assert_tag_reads(fixed, "mid", 6)


def test_expire_tags_by_their_retention(fixed):
    t = FileStoreTable.open(fixed.path)
    t.create_tag("short", 2, time_retained="1 h")
    t.create_tag("long", 3, time_retained="3 d")
    t.create_tag("forever", 4)
    expire(fixed, retain_min=2, time_retained_ms=0)
    created = t.tags.get("short").create_time
    assert t.expire_tags(now=created + dt.timedelta(minutes=59)) == []
    assert t.expire_tags(now=created + dt.timedelta(hours=2)) == ["short"]
    assert [x.name for x in t.list_tags()] == ["long", "forever"]
    assert on_disk(fixed.path) == referenced(fixed.path)
    # older_than also takes tags without retention (created when their file was written)
    assert t.expire_tags(older_than=dt.datetime.now() + dt.timedelta(minutes=1)) == ["long", "forever"]
    assert t.list_tags() == [] and on_disk(fixed.path) == referenced(fixed.path)
    assert_reads_latest(fixed)


def assert_reads_latest(b: Builder):
    sid = FileStoreTable.open(b.path).snapshots.latest_id()
    assert rows(FileStoreTable.open(b.path).to_arrow(), KEY) == b.expected(sid)
    assert rows(pypaimon_read(b.path).select(COLUMNS), KEY) == b.expected(sid)


# ---- rollback ----------------------------------------------------------------------------------------

def rolled_back(b: Builder, sid: int) -> None:
    """Make the builder continue from snapshot `sid` (model and bucket assigner)."""
    b.model = dict(b.models[sid])
    b.models = {k: v for k, v in b.models.items() if k <= sid}
    if b.dynamic:
        b.assigner.counts.clear()
        t = FileStoreTable.open(b.path)
        for part, index in load_partition_indexes(t.io, t.path, t.latest_snapshot()).items():
            b.assigner.counts[part] = dict(index.row_counts)


@pytest.mark.parametrize("dynamic", [False, True], ids=["fixed-bucket", "dynamic-bucket"])
def test_rollback_to_snapshot(bases, warehouse, dynamic):
    b = copy_of(bases[dynamic], warehouse, "t")
    t = FileStoreTable.open(b.path)
    for name, sid in (("t4", 4), ("t9", 9), ("t11", 11)):
        t.create_tag(name, sid)
    before = on_disk(b.path)
    result = t.rollback_to(6)
    assert result.snapshot.id == 6 and result.removed_snapshots == list(range(7, 13))
    assert sorted(result.removed_tags) == ["t11", "t9"]
    assert remaining(b) == list(range(1, 7))
    assert open(f"{b.path}/snapshot/LATEST").read() == "6"
    assert [x.name for x in t.list_tags()] == ["t4"]
    # the files only the removed snapshots and tags referenced are gone; no orphan is left
    assert on_disk(b.path) == referenced(b.path) < before
    if dynamic:
        assert result.deleted and any(k == "index" for k, _ in result.deleted)
    rolled_back(b, 6)
    assert rows(t.to_arrow(), KEY) == b.expected(6)
    assert rows(pypaimon_read(b.path).select(COLUMNS), KEY) == b.expected(6)
    assert_tag_reads(b, "t4", 4)
    # and the table goes on from there
    assert b.write(13) == 7
    assert rows(FileStoreTable.open(b.path).to_arrow(), KEY) == b.expected(7)
    assert rows(pypaimon_read(b.path).select(COLUMNS), KEY) == b.expected(7)
    assert on_disk(b.path) == referenced(b.path)


def test_rollback_to_tag_whose_snapshot_expired(fixed):
    t = FileStoreTable.open(fixed.path)
    t.create_tag("old", 3, time_retained="1d")
    t.create_tag("later", 8)
    expire(fixed, retain_min=2, time_retained_ms=0)
    assert remaining(fixed) == [11, 12]
    result = t.rollback_to("old")
    assert result.removed_snapshots == [11, 12] and result.removed_tags == ["later"]
    # the tag became the only snapshot: its JSON without the tag fields, and EARLIEST = LATEST = 3
    assert remaining(fixed) == [3]
    snap = read_json(f"{fixed.path}/snapshot/snapshot-3")
    tag = read_json(f"{fixed.path}/tag/tag-old")
    assert snap == {k: v for k, v in tag.items() if k not in ("tagCreateTime", "tagTimeRetained")}
    assert open(f"{fixed.path}/snapshot/EARLIEST").read() == "3"
    assert open(f"{fixed.path}/snapshot/LATEST").read() == "3"
    assert on_disk(fixed.path) == referenced(fixed.path) == references(fixed.path, t.snapshots.snapshot(3))
    rolled_back(fixed, 3)
    assert_reads_latest(fixed)
    assert fixed.write(20) == 4
    assert_reads_latest(fixed)


def test_rollback_to_tag_of_a_live_snapshot_and_errors(fixed):
    t = FileStoreTable.open(fixed.path)
    t.create_tag("ten", 10)
    with pytest.raises(PaimonError, match="Rollback snapshot '42' doesn't exist"):
        t.rollback_to(42)
    with pytest.raises(PaimonError, match="Tag 'nope' doesn't exist"):
        t.rollback_to("nope")
    with pytest.raises(PaimonError, match="snapshot id or a tag name"):
        t.rollback_to(True)
    assert remaining(fixed) == list(range(1, 13))
    assert t.rollback_to("ten").removed_snapshots == [11, 12]
    assert remaining(fixed) == list(range(1, 11)) and [x.name for x in t.list_tags()] == ["ten"]
    assert on_disk(fixed.path) == referenced(fixed.path)
    rolled_back(fixed, 10)
    assert_reads_latest(fixed)


def test_rollback_like_pypaimon_but_without_orphans(bases, warehouse):
    ours = copy_of(bases[False], warehouse, "ours")
    theirs = copy_of(bases[False], warehouse, "theirs")
    for b in (ours, theirs):
        FileStoreTable.open(b.path).create_tag("t9", 9)
        FileStoreTable.open(b.path).create_tag("t5", 5)
    FileStoreTable.open(ours.path).rollback_to(7)
    pypaimon_table(theirs.path).rollback_to(7)
    assert remaining(ours) == remaining(theirs) == list(range(1, 8))
    assert [x.name for x in FileStoreTable.open(ours.path).list_tags()] == ["t5"]
    assert [x.name for x in FileStoreTable.open(theirs.path).list_tags()] == ["t5"]
    rolled_back(ours, 7)
    rolled_back(theirs, 7)
    assert_reads_latest(ours)
    assert_reads_latest(theirs)
    # pypaimon (like Paimon >= 1.2) leaves the removed snapshots' files to orphan cleaning
    assert on_disk(theirs.path) > referenced(theirs.path)
    assert on_disk(ours.path) == referenced(ours.path) == referenced(theirs.path)


ROLLBACK_KILL = """
import os, signal, sys
sys.path.insert(0, {repo!r})
from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.maintenance.rollback import rollback
t = FileStoreTable.open({path!r})
seen = {{}}
def hook(kind, path):
    seen[kind] = seen.get(kind, 0) + 1
    if kind == {kind!r} and seen[kind] == {nth}:
        os.kill(os.getpid(), signal.SIGKILL)
rollback(t.io, t.path, t.schema, 5, before_delete=hook)
print("NOT KILLED", seen)
"""


@pytest.mark.parametrize("kind, nth", [("snapshot", 3), ("data", 2), ("manifest-list", 2)])
def test_rollback_killed_midway_leaves_a_readable_table_and_a_rerun_finishes(fixed, kind, nth):
    script = textwrap.dedent(ROLLBACK_KILL.format(repo=REPO, path=fixed.path, kind=kind, nth=nth))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    t = FileStoreTable.open(fixed.path)
    latest = t.snapshots.latest_id()
    # killed while deleting snapshot files (newest first) the table is at a snapshot not yet
    # deleted; afterwards it is at the target; either way every snapshot left reads correctly
    assert latest == (10 if kind == "snapshot" else 5)  # snapshots 12 and 11 were deleted
    for sid in t.snapshots.ids():
        assert rows(t.to_arrow(snapshot_id=sid), KEY) == fixed.expected(sid)
    assert rows(pypaimon_read(fixed.path, latest).select(COLUMNS), KEY) == fixed.expected(latest)
    assert on_disk(fixed.path) >= referenced(fixed.path)  # orphans at worst
    t.rollback_to(5)
    assert remaining(fixed) == [1, 2, 3, 4, 5]
    assert on_disk(fixed.path) >= referenced(fixed.path)
    rolled_back(fixed, 5)
    assert_reads_latest(fixed)
