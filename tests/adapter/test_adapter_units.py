"""The adapter's pure-Python parts, without Spark: profile, settings, messages, schema evolution rules."""

import os

import pytest
import yaml
from dbt_common.exceptions import DbtRuntimeError
from pyspark.sql import types as T

from dbt_paimon.adapter import evolution, macros_path
from dbt_paimon.engine.writes import schema_change
from dbt_paimon.sql.catalog import create_table_sql, load, provider_name, table_path
from dbt_paimon.adapter.connections import error_message
from dbt_paimon.adapter.credentials import PaimonCredentials
from dbt_paimon.engine import UpsertResult
from dbt_paimon.store import FileStoreTable, SchemaError
from dbt_paimon.store.common.types import DataType


def _creds(**kwargs):
    return PaimonCredentials(schema="s", **kwargs)


def test_profile_defaults_and_paths_relative_to_the_project(tmp_path):
    creds = _creds()
    assert creds.type == "paimon" and creds.method == "session" and creds.master == "local[*]"
    creds.resolve_paths(str(tmp_path))
    assert creds.warehouse == str(tmp_path / "paimon_warehouse")
    assert creds.spark_dir == str(tmp_path / "paimon_warehouse" / ".spark")
    assert dict(creds.connection_info()) == {"schema": "s", "warehouse": creds.warehouse, "master": "local[*]",
                                             "spark_dir": creds.spark_dir}

    uri = _creds(warehouse=f"file:{tmp_path}/wh", spark_dir="state")
    uri.resolve_paths(str(tmp_path / "project"))
    assert uri.warehouse == str(tmp_path / "wh")
    assert uri.spark_dir == str(tmp_path / "project" / "state")

    lake = _creds(warehouse="s3://bucket/wh/", storage_options={"s3.endpoint": "http://127.0.0.1:9000"})
    lake.resolve_paths(str(tmp_path / "project"))
    assert lake.warehouse == "s3://bucket/wh"  # Spark's catalog cannot live there: the project keeps it
    assert lake.spark_dir == str(tmp_path / "project" / ".dbt_paimon" / "spark")
    assert lake.storage_settings() == {"s3.endpoint": "http://127.0.0.1:9000"}
    assert "storage_options" not in dict(lake.connection_info())  # dbt debug prints these
    with pytest.raises(DbtRuntimeError, match="a local path, a file: URI, or an object store URI"):
        _creds(warehouse="hdfs://namenode/wh")
    with pytest.raises(DbtRuntimeError, match=r"storage_options \['bucket'\]: not store settings"):
        _creds(warehouse="s3://bucket/wh", storage_options={"bucket": "4"})
    with pytest.raises(DbtRuntimeError, match="spark_dir 's3://b/x': must be a local path"):
        _creds(warehouse="s3://bucket/wh", spark_dir="s3://b/x")
    with pytest.raises(DbtRuntimeError, match="method: session"):
        _creds(method="thrift")


def test_spark_settings_put_the_catalog_in_the_spark_dir_and_let_the_profile_win(tmp_path):
    creds = _creds(warehouse=str(tmp_path), master="local[2]", server_side_parameters={
        "spark.driver.extraJavaOptions": "-Dfoo=1", "spark.sql.shuffle.partitions": 4,
        "spark.sql.session.timeZone": "Europe/Amsterdam"})
    settings = creds.spark_settings(str(tmp_path / "my logs" / "spark.log"))
    assert settings["spark.master"] == "local[2]"
    # Spark's catalog is in memory (shared through spark_dir's records), its tables under spark_dir
    assert settings["spark.sql.catalogImplementation"] == "in-memory"
    assert settings["spark.sql.warehouse.dir"] == str(tmp_path / ".spark" / "tables")
    java = settings["spark.driver.extraJavaOptions"]
    assert java.startswith("-Dfoo=1 ") and f"-Dderby.system.home={tmp_path / '.spark'}" in java
    assert "-Dlog4j2.configurationFile=" in java
    # Spark's log file: quoted as Spark's launcher reads it (the path has a space)
    assert f'"-Ddbt_paimon.log.file={tmp_path / "my logs" / "spark.log"}"' in java
    assert settings["spark.sql.session.timeZone"] == "Europe/Amsterdam"
    assert settings["spark.sql.ansi.enabled"] == "false"  # dbt-spark's rule
    # what the session cursor sends with each statement: runtime settings only
    assert creds.statement_settings() == {"spark.sql.shuffle.partitions": "4",
                                          "spark.sql.session.timeZone": "Europe/Amsterdam",
                                          "spark.sql.ansi.enabled": "false"}


def test_spark_settings_fork_local_workers_from_the_preloading_daemon(tmp_path, monkeypatch):
    """A local master whose workers run this interpreter gets worker_daemon's daemon; a cluster
    master, workers of another Python, or a profile's own daemon module do not."""
    import sys

    from dbt_paimon.engine.runtime import local_session

    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    local = _creds(warehouse=str(tmp_path), master="local[2]").spark_settings()
    assert local["spark.python.daemon.module"] == "dbt_paimon.worker_daemon" == local_session.DAEMON_MODULE
    assert "spark.python.daemon.module" not in _creds(warehouse=str(tmp_path), master="spark://h:7077").spark_settings()
    other = _creds(warehouse=str(tmp_path), master="local[*]",
                   server_side_parameters={"spark.pyspark.python": "/opt/other/bin/python3"}).spark_settings()
    assert "spark.python.daemon.module" not in other
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/other/bin/python3")  # session.build keeps it over the profile's
    assert "spark.python.daemon.module" not in _creds(warehouse=str(tmp_path), master="local").spark_settings()
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    own = _creds(warehouse=str(tmp_path), server_side_parameters={"spark.python.daemon.module": "mine"})
    assert own.spark_settings()["spark.python.daemon.module"] == "mine"
    assert "spark.python.daemon.module" not in own.statement_settings()  # a session setting only


def test_spark_settings_hand_a_local_masters_task_results_over_directly(tmp_path):
    """local_session.py: results up to 128 MB in the task's status message on a local master (the
    driver-local upsert's hand-over); Spark's default on a cluster; the profile's value wins."""
    key = "spark.task.maxDirectResultSize"
    assert _creds(warehouse=str(tmp_path), master="local[2]").spark_settings()[key] == str(128 << 20)
    assert key not in _creds(warehouse=str(tmp_path), master="spark://h:7077").spark_settings()
    own = _creds(warehouse=str(tmp_path), master="local[2]", server_side_parameters={key: "4m"})
    assert own.spark_settings()[key] == "4m"
    assert key not in own.statement_settings()  # Spark refuses to SET a core setting in a running session


def test_plugin_macros_and_profile_template():
    from dbt.adapters.paimon import Plugin
    from dbt.adapters.paimon.__version__ import version

    assert Plugin.project_name == "dbt_paimon" and Plugin.dependencies == ["spark"] and version
    path = macros_path()
    assert Plugin.include_path == path
    with open(os.path.join(path, "dbt_project.yml")) as f:
        assert yaml.safe_load(f)["name"] == "dbt_paimon"
    with open(os.path.join(path, "profile_template.yml")) as f:
        template = yaml.safe_load(f)
    assert template["fixed"] == {"type": "paimon"}
    assert {"schema", "warehouse", "master", "threads"} <= set(template["prompts"])


def test_run_message():
    # one counts type (AssignCounts) says it for the engine and for dbt's run result
    result = UpsertResult(table_path="p", snapshot_id=3, inserted=100000, updated=50000, moved=50000)
    assert result.summary() == "UPSERT 200000: 100000 inserted, 50000 updated, 50000 moved"
    assert UpsertResult(table_path="p", snapshot_id=1, inserted=2, skipped=1, deleted=1).summary() == \
        "UPSERT 4: 2 inserted, 0 updated, 1 deleted, 1 skipped"


def test_error_message_keeps_our_words_and_drops_stacks():
    spark_error = ("An error occurred while calling o1.collect.\n: org.apache.spark.SparkException: Job aborted: "
                   "Traceback (most recent call last):\n  File \"x.py\", line 1\n"
                   "dbt_paimon.store.common.errors.DataError: primary key column 'id' is null in 1 row(s)\n"
                   "\tat org.apache.spark.Foo(Foo.scala:1)")
    assert error_message(Exception(spark_error)) == "primary key column 'id' is null in 1 row(s)"
    assert error_message(Exception("[TABLE_OR_VIEW_NOT_FOUND] x\n\tat org.Foo")) == "[TABLE_OR_VIEW_NOT_FOUND] x"


def _schema(tmp_path):
    import pyarrow as pa

    arrow = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("n", pa.int32()), ("s", pa.string())])
    return FileStoreTable.create(str(tmp_path / "db.db" / "t"), arrow, ["id"], ["dt"],
                                 {"fields.s.aggregate-function": "max", "merge-engine": "aggregation"}).schema


def test_schema_diff_treats_lossless_widenings_as_no_change(tmp_path):
    schema = _schema(tmp_path)
    same = T.StructType([T.StructField("ID", T.IntegerType()), T.StructField("dt", T.StringType()),
                         T.StructField("n", T.ShortType()), T.StructField("s", T.StringType())])
    assert not evolution.diff(schema, same).changed
    changed = evolution.diff(schema, T.StructType([
        T.StructField("id", T.LongType()), T.StructField("dt", T.StringType()), T.StructField("n", T.LongType()),
        T.StructField("extra", T.DateType())]))
    assert [f.name for f in changed.added] == ["extra"] and changed.removed == ["s"]
    assert [(n, t.root, s.simpleString()) for n, t, s in changed.retyped] == [("n", "INT", "bigint")]


def test_evolve_adds_with_new_ids_drops_and_widens(tmp_path):
    schema = _schema(tmp_path)
    new = schema_change.evolve(schema, add=[T.StructField("extra", T.DateType())], drop=["n"],
                           retype={}, options={"fields.extra.aggregate-function": "max"})
    assert new.id == 1 and new.highest_field_id == 4
    assert [(f.id, f.name, f.type.sql()) for f in new.fields] == [
        (0, "id", "BIGINT NOT NULL"), (1, "dt", "STRING"), (3, "s", "STRING"), (4, "extra", "DATE")]
    assert new.options["fields.extra.aggregate-function"] == "max"
    # a nested column's ROW fields are numbered after the column, in the same id space
    nested = schema_change.evolve(new, add=[T.StructField("addr", T.ArrayType(T.StructType([
        T.StructField("city", T.StringType()),
        T.StructField("geo", T.StructType([T.StructField("lat", T.DoubleType())]))])))])
    addr = nested.fields[-1]
    assert (addr.id, nested.highest_field_id) == (5, 8)
    assert [(f.id, f.name) for f in addr.type.element.fields] == [(6, "city"), (8, "geo")]
    assert addr.type.element.fields[1].type.fields[0].id == 7
    assert addr.type.sql() == "ARRAY<ROW<`city` STRING, `geo` ROW<`lat` DOUBLE>>>"
    assert schema_change.widened(addr.type, T.ArrayType(T.StringType())) is None
    assert schema_change.widened(DataType("INT"), T.LongType()).root == "BIGINT"
    assert schema_change.widened(DataType("DECIMAL", precision=10, scale=2), T.DecimalType(12, 1)).sql() == \
        "DECIMAL(13, 2)"  # room for both: 11 integer digits, 2 decimals
    assert schema_change.widened(DataType("BIGINT"), T.IntegerType()) is None
    assert schema_change.widened(DataType("STRING"), T.LongType()) is None
    for bad, message in ((dict(drop=["dt"]), "part of the primary or partition key"),
                         (dict(drop=["s"]), "refer to it"),
                         (dict(retype={"id": DataType("DOUBLE")}), "key column 'id'")):
        with pytest.raises(SchemaError, match=message):
            schema_change.evolve(schema, **bad)


def test_docs_schema_and_the_catalog_entry_it_gives(tmp_path):
    schema = _schema(tmp_path)
    docs = schema_change.with_docs(schema, "The table's 'comment'", {"ID": "the key", "nope": "ignored"})
    assert docs.comment == "The table's 'comment'" and docs.field("id").description == "the key"
    assert schema_change.with_docs(docs, "The table's 'comment'", {"id": "the key"}) is None
    path = str(tmp_path / "db.db" / "t")
    schema_change.commit(path, docs)
    table = load("DB", "T", path)
    assert table.provider == provider_name("db", "t", path, docs) != provider_name("db", "t", path, schema)
    ddl = create_table_sql(table)
    assert "`id` bigint COMMENT 'the key'" in ddl and "`n` int" in ddl
    assert "COMMENT 'The table\\'s \\'comment\\''" in ddl and f"USING {table.provider}" in ddl
    assert table_path("/wh", "Analytics", "Customers") == "/wh/analytics.db/customers"


def test_a_misspelt_profile_key_fails_naming_the_key_it_misses(tmp_path):
    """Through dbt's own reading of a profile target: `warehous:` would otherwise send every table
    to the default warehouse."""
    from dbt.config.profile import Profile
    from dbt.exceptions import DbtProfileError

    def target(**keys):
        return Profile._credentials_from_profile({"type": "paimon", "schema": "s", **keys}, "p", "dev")

    assert target(warehouse=str(tmp_path)).warehouse == str(tmp_path)
    with pytest.raises(DbtProfileError, match=r"profile key 'warehous' is not a paimon setting \(did you mean "
                                              r"'warehouse'\?\)"):
        target(warehous=str(tmp_path))
    with pytest.raises(DbtProfileError, match=r"profile key 'colour' is not a paimon setting \(schema, warehouse"):
        target(colour="blue")


def test_a_misspelt_model_config_fails_naming_the_config_it_misses():
    from dbt_paimon.adapter.configs import check_names

    check_names({"materialized": "incremental", "unique_key": "id", "post-hook": [], "meta": {},
                 "my_team_flag": True, "partition_by": "dt"}, "incremental")  # known, or no near miss
    for typo, meant in [("unique_keys", "unique_key"), ("partiton_by", "partition_by"), ("option", "options"),
                        ("sequenceby", "sequence_by")]:
        with pytest.raises(DbtRuntimeError,
                           match=rf"incremental: unknown config '{typo}' \(did you mean '{meant}'\?\)$"):
            check_names({"materialized": "incremental", typo: "x"}, "incremental")


def test_a_misspelt_table_option_fails_naming_the_option_it_misses():
    import pyarrow as pa

    from dbt_paimon.store.schema.schema import build_schema

    arrow = pa.schema([("id", pa.int64()), ("v", pa.int64())])
    with pytest.raises(SchemaError, match=r"^unknown table option 'bucket-keys' \(did you mean 'bucket-key'\?\)$"):
        build_schema(arrow, ["id"], (), {"bucket": "2", "bucket-keys": "id"})
    with pytest.raises(SchemaError, match=r"unknown table option 'colour' \(dbt-paimon rejects options"):
        build_schema(arrow, ["id"], (), {"colour": "blue"})


@pytest.mark.parametrize("materialization, config, keyed, full_refresh, expected", [
    ("incremental", {}, True, False, (True, "append")),  # merge, the default with a key
    ("incremental", {}, False, False, (False, "append")),  # append, the default without
    ("incremental", {"incremental_strategy": "append"}, False, False, (False, "append")),
    ("incremental", {"incremental_strategy": "insert_overwrite", "partition_by": "dt"}, False, False,
     (False, "overwrite-partitions")),
    ("incremental", {"incremental_strategy": "insert_overwrite"}, False, False, (False, "overwrite-table")),
    ("incremental", {"incremental_strategy": "insert_overwrite"}, False, True, (False, "append")),  # built anew
    ("table", {}, False, True, (False, "append")),
    ("seed", {}, False, True, (False, "append")),
    ("incremental", {"incremental_strategy": "insert_overwrite", "partition_by": "dt"}, True, False, (True, "append")),
    ("incremental", {"incremental_strategy": "delete+insert"}, True, False, (True, "append")),  # its upsert
    ("incremental", {"incremental_strategy": "delete+insert"}, False, False, (False, "append")),  # dbt's insert
])
def test_each_strategy_on_each_table_kind(materialization, config, keyed, full_refresh, expected):
    from dbt_paimon.adapter.configs import UpsertConfig
    from dbt_paimon.adapter.incremental import choose

    write = choose("s.m", materialization, UpsertConfig.of("s.m", config), keyed, full_refresh)
    assert (write.upsert, write.mode) == expected


@pytest.mark.parametrize("materialization, config, keyed, words", [
    ("paimon_upsert", {}, False, "a paimon_upsert model needs unique_key"),
    ("incremental", {"incremental_strategy": "merge"}, False, "incremental_strategy 'merge' needs unique_key"),
    ("incremental", {"incremental_strategy": "append"}, True, "incremental_strategy 'append' keeps every row"),
    ("incremental", {"sequence_by": "v"}, False, "sequence_by orders the versions of a key and needs unique_key"),
    ("table", {"merge_update_columns": ["v"]}, False, "merge_update_columns applies to the merge strategy"),
    ("incremental", {"incremental_strategy": "delete+insert", "options": {"merge-engine": "aggregation"}}, True,
     "'delete[+]insert' replaces a key's row whole, which a table with merge-engine 'aggregation'"),
    ("incremental", {"incremental_strategy": "delete+insert", "options": {"sequence.field": "v"}}, True,
     "'delete[+]insert' replaces a key's row whole, which a table ordering versions by sequence.field"),
])
def test_what_cannot_work_is_refused_in_the_words_of_the_model(materialization, config, keyed, words):
    from dbt_paimon.adapter.configs import UpsertConfig
    from dbt_paimon.adapter.incremental import choose

    with pytest.raises(DbtRuntimeError, match=words):
        choose("s.m", materialization, UpsertConfig.of("s.m", config), keyed, False)


def test_strategies_a_paimon_table_does_not_take_are_refused_before_the_run():
    from dbt_paimon.adapter.incremental import table_format

    assert table_format("seed", "paimon") == "paimon" and table_format("seed", None) == "spark"
    assert table_format("incremental", "paimon", "insert_overwrite") == "paimon"
    assert table_format("incremental", "paimon", "microbatch") == "paimon"
    assert table_format("incremental", "paimon", "delete+insert") == "paimon"
    with pytest.raises(DbtRuntimeError, match="incremental_strategy 'bad_strategy' is not supported on a Paimon"):
        table_format("incremental", "paimon", "bad_strategy")


def test_a_models_run_settings_are_built_once_from_its_config():
    """Run keys and store settings among a model's `options` go to its RunSettings with `execution`
    and `key_index`; the table keeps only its own options; a bad run key names the model."""
    from dbt_paimon.adapter.configs import UpsertConfig

    given = UpsertConfig.of("s.m", {"execution": "local", "key_index": False, "options": {
        "bucket": "2", "commit.max-retries": "3", "sink.parallelism": 4, "s3.endpoint": "http://h:1"}})
    assert given.options == {"bucket": "2"}
    assert (given.settings.execution, given.settings.key_index, given.settings.commit_max_retries,
            given.settings.sink_parallelism) == ("local", False, 3, 4)
    assert given.settings.storage_options == {"s3.endpoint": "http://h:1"}
    assert "http://h:1" not in repr(given.settings)
    with pytest.raises(DbtRuntimeError, match=r"s\.m: .*'commit.max-retries' must be positive, got -1"):
        UpsertConfig.of("s.m", {"options": {"commit.max-retries": "-1"}})


def test_the_system_table_macro_knows_every_system_table_the_store_reads():
    """paimon_system_table checks the name when dbt parses (no adapter call there): its list is the
    store's, `branches` included."""
    import re
    from dbt_paimon.store import SYSTEM_TABLES
    with open(os.path.join(macros_path(), "maintenance.sql")) as f:
        text = f.read()
    macro = text[text.index("macro paimon_system_table"):]
    known = re.search(r"set known = \[([^\]]*)\]", macro).group(1)
    assert [name.strip().strip("'") for name in known.split(",")] == list(SYSTEM_TABLES)
