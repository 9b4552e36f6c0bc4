"""deploy.py's decisions that need no cluster: what is zipped, which masters are clusters, and which
executor reports are refused (the cluster tests run the real thing)."""

from __future__ import annotations

import os
import shutil
import zipfile

from dbt_paimon.engine.runtime import deploy

DRIVER = {"python": "3.11.7", "pyarrow": "19.0.1", "numpy": "2.4.6"}


SHIPPED_AT = "/x/userFiles/dbt_paimon-abc.zip/dbt_paimon/__init__.py"


def _report(host="node-1", python="3.11.7", missing=(), dbt_paimon=SHIPPED_AT, **versions):
    return {"host": host, "executable": "/opt/env/bin/python", "python": python, "missing": list(missing),
            "versions": {"pyarrow": "19.0.1", "numpy": "2.4.6", "fastavro": "1.13.1", **versions},
            "dbt_paimon": None if missing else dbt_paimon}


def test_the_zip_holds_the_package_as_imported_and_its_name_follows_the_content(tmp_path):
    source = tmp_path / "src" / "dbt_paimon"
    shutil.copytree(deploy.package_dir(), source, ignore=shutil.ignore_patterns("__pycache__"))
    (source / "__pycache__").mkdir()
    (source / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"stale")
    first = deploy.package_zip(str(tmp_path / "cache"), str(source))
    tasks = source / "engine" / "runtime" / "tasks.py"
    with zipfile.ZipFile(first) as zf:
        names = zf.namelist()
        assert zf.read("dbt_paimon/engine/runtime/tasks.py") == tasks.read_bytes()
    assert all(n.startswith("dbt_paimon/") for n in names) and not any("__pycache__" in n for n in names)
    assert "dbt_paimon/__init__.py" in names and "dbt_paimon/engine/runtime/deploy.py" in names
    assert deploy.package_zip(str(tmp_path / "cache"), str(source)) == first  # cached by content
    tasks.write_text(tasks.read_text() + "\n# changed\n")
    changed = deploy.package_zip(str(tmp_path / "cache"), str(source))
    assert changed != first and os.path.basename(changed).startswith("dbt_paimon-")


def test_only_local_masters_run_without_shipping():
    for master in ("local", "local[2]", "local[*]", "local[2,3]"):
        assert not deploy.is_cluster_master(master)
    for master in ("spark://10.0.0.1:7077", "local-cluster[2,1,1024]", "yarn", "k8s://https://h:6443"):
        assert deploy.is_cluster_master(master)


def test_object_store_tables_need_their_client_on_the_executors():
    assert "obstore" in deploy.modules_for("s3://lake/wh/db.db/t")
    for path in ("/wh/db.db/t", "file:///wh/db.db/t", None):
        assert "obstore" not in deploy.modules_for(path)
        assert {"pyarrow", "numpy", "fastavro", "backports.zstd", "pyroaring"} <= set(deploy.modules_for(path))


def test_reports_that_break_pickles_or_arrow_are_problems_per_host():
    shipped = "dbt_paimon-abc.zip"
    assert deploy.problems([_report(), _report(pyarrow="19.0.0", numpy="2.1.0", python="3.11.2")], DRIVER,
                           shipped) == {}
    found = deploy.problems([
        _report("node-1", missing=["fastavro"]), _report("node-1", missing=["fastavro"]),  # two executors, one line
        _report("node-2", numpy="1.26.4", pyarrow="18.1.0"),
        _report("node-3", python="3.12.1"),
        _report("node-4", dbt_paimon="/opt/env/lib/python3.11/site-packages/dbt_paimon/__init__.py"),
    ], DRIVER, shipped)
    where = {k.split(" ")[0]: v for k, v in found.items()}
    assert where["node-1"] == ["missing fastavro"]
    assert where["node-2"] == ["pyarrow 18.1.0 but the driver has 19.0.1 (the major versions must agree)",
                               "numpy 1.26.4 but the driver has 2.4.6 (the major versions must agree)"]
    assert where["node-3"] == ["Python 3.12.1 but the driver runs 3.11.7"]
    assert where["node-4"] == ["imports dbt_paimon from /opt/env/lib/python3.11/site-packages/dbt_paimon/__init__.py, "
                               "not the shipped dbt_paimon-abc.zip"]


def test_a_task_missing_a_module_reads_as_the_same_advice():
    trace = "Traceback ...\n  File \"x.py\"\nModuleNotFoundError: No module named 'fastavro'\n\tat org.apache..."
    error = deploy.missing_module_error(trace)
    assert isinstance(error, deploy.ExecutorEnvironmentError) and "'fastavro'" in str(error)
    assert "spark.archives" in str(error)
    assert "deploy.ship(spark)" in str(deploy.missing_module_error("ModuleNotFoundError: No module named 'dbt_paimon'"))
    assert deploy.missing_module_error("ValueError: something else") is None
