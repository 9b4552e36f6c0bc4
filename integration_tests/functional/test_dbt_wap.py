"""Write, audit, publish (issue 61): `dbt build --vars '{paimon_branch: NAME}'` writes every Paimon model,
seed and snapshot on branch NAME of its table, ref() and tests read that branch, and the on-run-end
`paimon_publish(results)` fast-forwards main only when every node passed. A build whose test fails
leaves main's metadata byte-identical and the branch for inspection; a publish that stopped halfway
is completed by `dbt run-operation paimon_publish`. Tables are read back by our store and pypaimon
(the branch, and the published main); tests/java_paimon/test_branches_java.py holds branches against Java."""

import json
import os

import pytest
from dbt.tests.util import run_dbt

from dbt_common.exceptions import DbtRuntimeError

from dbt_paimon import key_index
from dbt_paimon.adapter.wap import build_branch
from dbt_paimon.store import FileStoreTable
from tests.files import fingerprint
from tests.oracle import pypaimon_read, pypaimon_table, rows

ORDERS = """
{{ config(materialized='paimon_upsert', unique_key='id', partition_by='region') }}
{% set batches = {
    1: "(1, 'eu', 'ann', 10), (2, 'us', 'bob', 20)",
    2: "(2, 'eu', 'bob', 21), (3, 'us', 'cid', 30)",
    3: "(4, 'eu', 'dee', 40)",
    4: "(2, 'us', 'bob', 22)",
} %}
select * from values {{ batches[var('batch', 1)] }} as src(id, region, name, amount)
"""
TOTALS = """
{{ config(materialized='table', file_format='paimon', unique_key='region') }}
select region, sum(amount) as total from {{ ref('orders') }} group by region
"""
SCHEMA_YML = """
version: 2
models:
  - name: orders
    columns:
      - name: id
        data_tests: [unique, not_null]
"""
# fails on a build given `bad`: the audit that keeps a bad build off main
AUDIT = """
select * from {{ ref('orders') }} where {{ 'amount > 25' if var('bad', false) else 'false' }}
"""
PEOPLE_CSV = "id,name\n1,ann\n2,bob\n"
SNAPSHOT = """
{% snapshot people_history %}
{{ config(strategy='check', unique_key='id', check_cols=['name'], target_schema=target.schema) }}
select * from {{ ref('people') }}
{% endsnapshot %}
"""
NAMES = ("orders", "totals", "people", "people_history")


def _path(project, name):
    return os.path.join(project.adapter.config.credentials.warehouse, f"{project.test_schema}.db", name)


def _main_metadata(project) -> dict:
    """main's own metadata of every table (snapshots, schemas, tags, consumers), byte for byte."""
    out = {}
    for name in NAMES:
        for folder in ("snapshot", "schema", "tag", "consumer"):
            root = os.path.join(_path(project, name), folder)
            if os.path.isdir(root):
                out.update({f"{name}/{folder}/{k}": v for k, v in fingerprint(root).items()})
    return out


def _read(project, name, branch=None):
    return rows(FileStoreTable.open(_path(project, name), branch=branch).to_arrow(), "id" if name != "totals"
                else "region")


def _index_version(project, branch=None) -> tuple[str, int]:
    """(manifest, snapshot it reflects) of the current version of orders' key index on a branch."""
    where = key_index.index_dir(_path(project, "orders")) + (f"/branch-{branch}" if branch else "")
    with open(f"{where}/{key_index.LATEST}") as f:
        manifest = json.load(f)["manifest"]
    with open(f"{where}/{manifest}") as f:
        return manifest, json.load(f)["snapshot"]


def _build(project, *, expect_pass=True, **variables):
    return run_dbt(["build", "--vars", json.dumps(variables)], expect_pass=expect_pass)


class TestWriteAuditPublish:
    @pytest.fixture(scope="class")
    def models(self):
        return {"orders.sql": ORDERS, "totals.sql": TOTALS, "schema.yml": SCHEMA_YML}

    @pytest.fixture(scope="class")
    def tests(self):
        return {"audit.sql": AUDIT}

    @pytest.fixture(scope="class")
    def seeds(self):
        return {"people.csv": PEOPLE_CSV}

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"people_history.sql": SNAPSHOT}

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"seeds": {"+file_format": "paimon"},
                "on-run-end": ["{% if not var('hold', false) %}{% do paimon_publish(results) %}{% endif %}"]}

    def test_a_failing_build_leaves_main_and_a_passing_one_publishes(self, project):
        _build(project, batch=1)  # no branch: main as always
        before = {n: _read(project, n) for n in NAMES}
        assert [r["id"] for r in before["orders"]] == [1, 2]
        untouched, main_index = _main_metadata(project), _index_version(project)

        # the audit fails: nothing reaches main, the branch stays with what the build wrote
        results = _build(project, expect_pass=False, batch=2, bad=True, paimon_branch="wap1")
        assert [r.status for r in results.results if r.node.name == "audit"] == ["fail"]
        orders = [r for r in results.results if r.node.name == "orders"][0].adapter_response
        on_wap1 = FileStoreTable.open(_path(project, "orders"), branch="wap1")
        assert orders["snapshot_id"] == on_wap1.snapshots.latest_id()
        assert orders["schema_id"] == 0
        assert _main_metadata(project) == untouched and _index_version(project) == main_index
        # the branch's upsert looked its keys up in its own index, started from main's
        assert _index_version(project, "wap1")[1] == on_wap1.snapshots.latest_id()
        assert {n: _read(project, n) for n in NAMES} == before
        on_branch = _read(project, "orders", "wap1")
        assert [(r["id"], r["region"], r["amount"]) for r in on_branch] == [(1, "eu", 10), (2, "eu", 21),
                                                                             (3, "us", 30)]
        builder = pypaimon_table(_path(project, "orders")).copy({"branch": "wap1"}).new_read_builder()
        assert rows(builder.new_read().to_arrow(builder.new_scan().plan().splits()), "id") == on_branch
        assert FileStoreTable.open(_path(project, "people")).list_branches() == ["wap1"]

        # the same build without the bad row: tests pass, main gets it, the branch goes. The
        # downstream `table` model read the branch's orders (main's would give eu 10, us 20)
        _build(project, batch=2, paimon_branch="wap2")
        assert [(r["id"], r["amount"]) for r in _read(project, "orders")] == [(1, 10), (2, 21), (3, 30)]
        assert _read(project, "totals") == [{"region": "eu", "total": 31}, {"region": "us", "total": 30}]
        assert FileStoreTable.open(_path(project, "orders")).list_branches() == ["wap1"]
        # main's key index is the published branch's version; the branch's own versions went with it
        assert _index_version(project)[1] == FileStoreTable.open(_path(project, "orders")).snapshots.latest_id()
        assert not os.path.exists(key_index.index_dir(_path(project, "orders")) + "/branch-wap2")
        assert rows(pypaimon_read(_path(project, "orders")), "id") == _read(project, "orders")
        assert len(_read(project, "people_history")) == 2

    def test_a_publish_that_stopped_halfway_is_finished_by_running_it_again(self, project):
        before = [r["id"] for r in _read(project, "orders")]
        _build(project, batch=3, paimon_branch="wap3", hold=True)  # built and tested, not published
        assert [r["id"] for r in _read(project, "orders")] == before
        # one table published by hand (as a publish that stopped after it would leave it)
        run_dbt(["run-operation", "paimon_fast_forward", "--args",
                 json.dumps({"relation": f"{project.test_schema}.orders", "branch": "wap3"})])
        assert [r["id"] for r in _read(project, "orders")] == sorted(before + [4])
        assert _read(project, "totals") != _read(project, "totals", "wap3")
        run_dbt(["run-operation", "paimon_publish", "--args", json.dumps({"branch": "wap3"})])
        assert _read(project, "totals") == _read_model_totals(_read(project, "orders"))
        assert all("wap3" not in FileStoreTable.open(_path(project, n)).list_branches() for n in NAMES)
        # main's key index (orders is a cross-partition table) catches up with the published
        # snapshots: key 2, moved to 'eu' on a branch, moves back to 'us' once, not twice
        _build(project, batch=4)
        assert [(r["id"], r["region"]) for r in _read(project, "orders") if r["id"] == 2] == [(2, "us")]
        assert rows(pypaimon_read(_path(project, "orders")), "id") == _read(project, "orders")


def _read_model_totals(orders: list[dict]) -> list[dict]:
    totals: dict = {}
    for r in orders:
        totals[r["region"]] = totals.get(r["region"], 0) + r["amount"]
    return [{"region": k, "total": v} for k, v in sorted(totals.items())]


def test_bad_branch_names_are_refused_in_the_users_words():
    with pytest.raises(DbtRuntimeError, match="--vars paimon_branch: Branch name '../x' may hold only"):
        build_branch({"paimon_branch": "../x"})
    with pytest.raises(DbtRuntimeError, match="is the default branch"):
        build_branch({"paimon_branch": "main"})
    assert build_branch({}) is None and build_branch({"paimon_branch": "wap_1"}) == "wap_1"
