"""RunSettings: a run's settings taken out of a user's options, apart from the table options (no Spark)."""

import pytest

from dbt_paimon.engine.settings import EXECUTIONS, RUN_OPTIONS, Execution, RunSettings
from dbt_paimon.store.common.errors import SchemaError
from dbt_paimon.store.common.options import CoreOptions, DEFAULTS, BucketMode, MergeEngine


def test_from_options_splits_run_keys_storage_keys_and_table_options():
    settings, table = RunSettings.from_options({
        "bucket": "-1", "merge-engine": "first-row",
        "dynamic-bucket.assigner-parallelism": "3", "sink.parallelism": 4,
        "cross-partition-upsert.bootstrap-parallelism": "5", "commit.max-retries": "0",
        "s3.endpoint": "http://x", "s3.secret-key": "hush", "commit.lock": "x",
    })
    assert table == {"bucket": "-1", "merge-engine": "first-row"}
    assert (settings.assigner_parallelism, settings.sink_parallelism, settings.bootstrap_parallelism,
            settings.commit_max_retries) == (3, 4, 5, 0)
    assert settings.storage_options == {"s3.endpoint": "http://x", "s3.secret-key": "hush", "commit.lock": "x"}
    assert settings.execution == Execution.AUTO
    assert settings.run_options() == {"dynamic-bucket.assigner-parallelism": "3", "sink.parallelism": "4",
                                      "cross-partition-upsert.bootstrap-parallelism": "5",
                                      "commit.max-retries": "0"}
    assert set(settings.run_options()) == RUN_OPTIONS
    assert "hush" not in repr(settings)


def test_from_options_without_run_keys():
    settings, table = RunSettings.from_options(None)
    assert settings == RunSettings() and table == {}
    settings, table = RunSettings.from_options({"bucket": "2"})
    assert settings.storage_options is None and settings.run_options() == {} and table == {"bucket": "2"}


def test_base_settings_and_precedence():
    base = RunSettings(execution="local", sink_parallelism=2, storage_options={"s3.region": "eu"})
    settings, table = RunSettings.from_options({"sink.parallelism": "7", "s3.region": "us", "s3.endpoint": "e"},
                                               base)
    assert table == {}
    assert settings.execution is Execution.LOCAL
    assert settings.sink_parallelism == 7  # a run key given among the options overrides the base
    assert settings.storage_options == {"s3.region": "eu", "s3.endpoint": "e"}  # explicit store settings win


def test_over_takes_unset_run_keys_from_the_stored_options():
    stored = {"sink.parallelism": "3", "dynamic-bucket.assigner-parallelism": "2", "bucket": "-1"}
    settings = RunSettings(assigner_parallelism=5).over(stored)
    assert (settings.assigner_parallelism, settings.sink_parallelism, settings.bootstrap_parallelism) == (5, 3, None)


@pytest.mark.parametrize("key,value,message", [
    ("sink.parallelism", "0", "option 'sink.parallelism' must be a positive integer, got '0'"),
    ("dynamic-bucket.assigner-parallelism", "-2",
     "option 'dynamic-bucket.assigner-parallelism' must be a positive integer, got '-2'"),
    ("cross-partition-upsert.bootstrap-parallelism", "x",
     "option 'cross-partition-upsert.bootstrap-parallelism' must be an integer, got 'x'"),
    ("commit.max-retries", "many", "option 'commit.max-retries' must be an integer, got 'many'"),
    ("commit.max-retries", "-1", "option 'commit.max-retries' must be positive, got -1"),
])
def test_bad_values_are_refused(key, value, message):
    with pytest.raises(SchemaError) as e:
        RunSettings.from_options({key: value})
    assert str(e.value) == message


def test_execution_values():
    assert EXECUTIONS == ("auto", "local", "distributed")
    assert [e.value for e in Execution] == list(EXECUTIONS)
    assert Execution.LOCAL == "local" and f"{Execution.DISTRIBUTED}" == "distributed"
    assert str(Execution.AUTO) == "auto" and {"local": 1}[Execution.LOCAL] == 1
    assert RunSettings(execution="distributed").execution is Execution.DISTRIBUTED
    with pytest.raises(ValueError, match="execution must be one of auto, local, distributed, got 'fast'"):
        RunSettings(execution="fast")


def test_bucket_mode_and_merge_engine_enums():
    assert CoreOptions({}).merge_engine is MergeEngine.DEDUPLICATE
    assert CoreOptions({"merge-engine": "first-row"}).merge_engine == "first-row"
    assert f"a {MergeEngine.PARTIAL_UPDATE} table" == "a partial-update table"
    assert CoreOptions({"merge-engine": "lookup"}).merge_engine == "lookup"  # refused by readers, not here
    assert BucketMode.HASH_DYNAMIC == "HASH_DYNAMIC" and repr(BucketMode.KEY_DYNAMIC) == "'KEY_DYNAMIC'"


def test_defaults_written_once():
    core = CoreOptions({})
    assert core.target_row_num == int(DEFAULTS["dynamic-bucket.target-row-num"]) == 2_000_000
    assert core.snapshot_num_retained_min == 10 and core.num_sorted_run_compaction_trigger == 5
    assert core.snapshot_time_retained_ms == 3_600_000 and core.snapshot_expire_limit == 50
    assert CoreOptions({"snapshot.num-retained.min": "3"}).snapshot_num_retained_min == 3
