"""The engine's Spark jobs on a real standalone cluster whose executors have not got dbt_paimon.

One child process (engine_scenarios.py) runs everything as one Spark application: it probes the
executors before shipping, then three distributed upserts whose keys move partitions, a delete, a
compaction, and jobs on executors whose Python lacks fastavro or is another minor version. The
tests here check its report against an independent model, read the table with pypaimon and our
reader, and read Spark's event log for where the tasks ran.
"""

from __future__ import annotations

import json
import os
import sys
import uuid

import pytest

from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.common import fileio
from dbt_paimon.store.compaction.compact import max_level
from dbt_paimon.store.snapshot.snapshot import COMPACT
from tests.cluster import events
from tests.cluster.standalone import run_child
from tests.engine.helpers import COLUMNS, by_key, live_places, pypaimon_rows
from tests.engine.model import UpsertModel, random_batches
from tests.oracle import model_rows
from tests.s3 import BUCKET

HERE = os.path.dirname(os.path.abspath(__file__))
SEED, BATCHES, SIZE, KEY_SPACE = 7, 3, 150, 250
INDEX_BATCHES = 2  # after the first BATCHES, more through the key index (built by the second upsert's job)
DELETE_WHERE = "v < 0"


@pytest.fixture(scope="module")
def run(cluster, executor_pythons, tmp_path_factory, s3_server):
    """One child application on the cluster; the warehouse on the session's S3 server, which the
    executors reach with the settings each task carries."""
    root = tmp_path_factory.mktemp("engine-on-cluster")
    fileio.configure(s3_server.options)  # this process reads the results back from the store
    config = {"master": cluster.master_url, "python": executor_pythons["full"], "storage": s3_server.options,
              "python_no_fastavro": executor_pythons["no_fastavro"],
              "python_other_minor": executor_pythons["other_minor"],
              "table": f"s3://{BUCKET}/cluster-{uuid.uuid4().hex[:8]}/wh/db.db/t", "scratch": str(root / "scratch"),
              "events": str(root / "events"), "seed": SEED, "batches": BATCHES, "size": SIZE,
              "key_space": KEY_SPACE, "delete_where": DELETE_WHERE, "index_batches": INDEX_BATCHES}
    os.makedirs(config["events"])
    with open(root / "config.json", "w") as f:
        json.dump(config, f)
    report = run_child(cluster, [os.path.join(HERE, "engine_scenarios.py"), str(root / "config.json"),
                                 str(root / "report.json")], cwd=str(root), python=executor_pythons["full"],
                       report=str(root / "report.json"))
    return {"report": report, "config": config, "site": os.path.join(os.path.dirname(executor_pythons["full"]),
                                                                     "site-packages")}


def _model() -> tuple[UpsertModel, list[dict]]:
    model = UpsertModel(["id"], ["dt"])
    batches = random_batches(SEED, BATCHES, SIZE, KEY_SPACE) + random_batches(SEED + 2, INDEX_BATCHES, SIZE, KEY_SPACE)
    counts = [model.apply(rows) for rows in batches]
    return model, counts


def test_executors_cannot_import_dbt_paimon_by_themselves(run):
    """Else every other test here would pass without shipping anything."""
    probes = run["report"]["without_ship"]
    assert len({p["cwd"] for p in probes}) == 2  # two executors
    for p in probes:
        assert p["outcome"] == "ModuleNotFoundError: No module named 'dbt_paimon'"
        assert run["site"] in p["path"]  # the restricted Python


def test_prepare_ships_the_driver_code_and_checks_every_executor(run):
    report = run["report"]
    for label in ("prepare_cold", "prepare_warm"):
        reports = report[label]
        assert {r["executor"] for r in reports} == {"0", "1"}
        for r in reports:
            assert r["missing"] == [] and run["site"] in r["path"]
            # the shipped zip, named by the content hash of the package the driver imports
            assert ".zip/dbt_paimon/__init__.py" in r["dbt_paimon"] and "/dbt_paimon-" in r["dbt_paimon"]
    assert report["seconds"]["prepare_warm"] < 5


def test_distributed_upserts_match_the_model(run):
    model, counts = _model()
    upserts = run["report"]["upserts"]
    assert [u["execution"] for u in upserts] == ["distributed"] * (BATCHES + INDEX_BATCHES)  # auto, on a cluster
    for got, want in zip(upserts, counts):
        assert {k: got[k] for k in want} == want
    # the second one built the key index in Spark tasks on the executors (the first created the
    # table); every later one bootstrapped from it on the executors and recorded its commit
    # there: the next refresh has nothing to catch up
    assert [u.get("built_by") for u in upserts] == [None, "spark"] + [None] * (len(upserts) - 2)
    assert [u.get("bootstrap") for u in upserts[1:]] == ["key index"] * (len(upserts) - 1)
    assert run["report"]["index_after"] == {"built": False, "buckets_read_again": 0, "buckets_added_to": 0}
    assert sum(c["moved"] for c in counts) > 50  # keys really moved partitions
    assert run["report"]["read_rows"] == len(model.rows)  # the `paimon` source, read on the executors


def test_spark_reads_a_merged_local_table_on_the_executors(run):
    """A table on the shared local disk: Spark's Parquet reader reads it on the executors, less the
    versions the merge drops (the bitmap reaches the tasks with the query, not as a file of the
    driver), and its rows are the model's."""
    native = run["report"]["native_read"]
    model = UpsertModel(["id"], [])
    for rows in random_batches(SEED, 2, SIZE, KEY_SPACE):
        model.apply(rows)
    assert native["bitmap"] and not native["python"]
    want = by_key([{"id": r["id"], "dt": r["dt"], "v": r["v"]} for r in model.rows.values()])
    assert native["rows"] == want
    assert [{k: r[k] for k in ("id", "dt", "v")} for r in pypaimon_rows(native["path"])] == want
    assert set(events.group_tasks(run["config"]["events"], run["report"]["app_id"], "native-read")) == {"0", "1"}


def test_delete_and_compaction_on_the_cluster(run):
    model, _ = _model()
    doomed = [k for k, r in model.rows.items() if r["v"] is not None and r["v"] < 0]
    for k in doomed:
        del model.rows[k]
    report = run["report"]
    assert report["delete"]["deleted"] == len(doomed) > 0
    table = FileStoreTable.open(run["config"]["table"])
    latest = table.latest_snapshot()
    assert latest.id == report["compact"]["snapshot_id"] and latest.commit_kind == COMPACT
    level = max_level(table.schema)
    assert all(len(s.files) == 1 and s.files[0].level == level for s in table.plan().splits)
    expected = model_rows(model.rows, COLUMNS, "id")
    assert pypaimon_rows(run["config"]["table"]) == expected
    assert by_key(table.to_arrow().select(COLUMNS).to_pylist()) == expected
    assert set(live_places(run["config"]["table"]).values()) == {1}


SQL_RESULTS = [  # after each of engine_scenarios.SQL_STATEMENTS: the table's rows, the kind of its commit
    ([[1, "b", 11], [2, "a", 20], [3, "b", 30], [4, "a", 40]], "APPEND"),  # key 1 moved partition, once
    ([[1, "b", 11], [2, "a", 120], [3, "b", 30], [4, "a", 140]], "APPEND"),
    ([[1, "b", 11], [3, "b", 33], [4, "a", 140], [5, "b", 50]], "APPEND"),
    ([[1, "b", 11], [3, "b", 33], [5, "b", 50]], "APPEND"),
    ([[1, "a", 10], [2, "a", 20], [3, "b", 30], [4, "b", 40]], "APPEND"),  # the append table
    # an append table's UPDATE and DELETE rewrite its files: OVERWRITE, as Paimon's commit names it
    ([[1, "a", 10], [2, "a", -20], [3, "b", 30], [4, "b", 40]], "OVERWRITE"),
    ([[1, "a", 10], [2, "a", -20]], "OVERWRITE"),
]


def test_spark_sql_statements_run_on_the_executors_over_s3(run):
    """INSERT, UPDATE, MERGE INTO, DELETE on a cross-partition key table and an append table of the
    S3 warehouse, from the cluster application's session: each one snapshot with the expected rows,
    read back by pypaimon, and the statements' Arrow tasks ran on both executors (the event log)."""
    report = run["report"]
    assert "failure" not in report, report.get("failure")
    # one commit each; an upsert's writers may compact a bucket whose sorted runs reached the trigger,
    # in a COMPACT snapshot of the same commit, as Paimon's do
    assert [(r["rows"], [k for k in r["commits"] if k != "COMPACT"]) for r in report["sql"]] == \
        [(rows, [kind]) for rows, kind in SQL_RESULTS]
    assert all(r["commits"][0] != "COMPACT" for r in report["sql"])
    warehouse = run["config"]["table"].rsplit("/db.db/", 1)[0]
    for name, (rows, _) in (("cross", SQL_RESULTS[3]), ("logs", SQL_RESULTS[-1])):
        assert sorted([r["id"], r["dt"], r["v"]] for r in pypaimon_rows(f"{warehouse}/db.db/{name}")) == rows
    seen = events.python_tasks(run["config"]["events"], report["app_id"], job_group="sql")
    assert seen["arrow_stages"] >= len(SQL_RESULTS)
    assert set(seen["tasks_per_executor"]) == {"0", "1"}


def test_arrow_tasks_ran_on_both_executors(run):
    """Spark's event log, not our code, says where the engine's tasks ran."""
    seen = events.python_tasks(run["config"]["events"], run["report"]["app_id"])
    assert seen["arrow_stages"] >= 10
    assert set(seen["tasks_per_executor"]) == {"0", "1"}  # no "driver": nothing ran in-process
    assert seen["job_descriptions"].count("dbt-paimon: check the executors' Python") >= 5


def test_executors_missing_a_module_are_refused_before_writing(run):
    refusals = run["report"]["refusals"]
    for name in ("upsert_no_fastavro", "delete_no_fastavro"):
        r = refusals[name]
        assert r["type"] == "ExecutorEnvironmentError", r
        assert r["snapshot_after"] == r["snapshot_before"] and r["files_unchanged"]
        message = r["error"]
        assert message.startswith("Spark's executors cannot run dbt-paimon's tasks:\n")
        assert "missing fastavro" in message.splitlines()[1]  # per host, with its Python
        for hint in ("spark.archives=env.tar.gz#env", "PYSPARK_PYTHON=./env/bin/python", "venv-pack",
                     "'fastavro==", "install them on every node", "Nothing was committed"):
            assert hint in message
        assert "Traceback" not in message and "Py4J" not in message


def test_executors_of_another_python_are_refused_before_writing(run, executor_pythons):
    if executor_pythons["other_minor"] is None:
        pytest.skip("no CPython of another minor version on this machine")
    r = run["report"]["refusals"]["upsert_other_minor"]
    assert r["type"] == "ExecutorEnvironmentError", r
    assert r["snapshot_after"] == r["snapshot_before"] and r["files_unchanged"]
    assert "PYTHON_VERSION_MISMATCH" in r["error"]
    assert f"Executors need Python {sys.version_info[0]}.{sys.version_info[1]} with" in r["error"]
    assert "Traceback" not in r["error"]
