"""How the suite is shared between pytest-xdist workers (`bash run.sh test` runs two, one per core).

One process leaves about a third of the 2 cores idle (waiting on a JVM, a child process, a
server), which a second worker fills: the suite is CPU-bound beyond that (1,183 s on two workers
of a quiet machine, 2,335 s of test time between them; a loaded machine takes up to twice that).
Each worker is a test session of its own: its SparkSession, and the servers its tests ask for. What a
unit of work is, and in which order the units are handed out:

- a file is one unit (its module and class fixtures are built once), except the files that share a
  costly server of their own: the standalone cluster's (tests/cluster) and Paimon's Spark connector's
  (tests/paimon_spark, a unit per release of the connector) are one unit each, so one worker starts
  each; and a file of many independent
  classes (PER_CLASS) is a unit per class;
- the dbt functional suite first, `test_dbt_project.py` before all (integration_tests/conftest.py
  says why), so that every worker's SparkSession is the one dbt's profile asks for;
- then the longest first (SECONDS: the last measured seconds of the slow files on these 2 cores), so
  that the last unit handed out is a short one. A stale figure only costs balance.

`--dist loadscope --no-loadscope-reorder` with `scheduler` (the root conftest.py hands it to xdist) makes
xdist keep the units and this order. (xdist's own `loadgroup` marks cannot: they rename each test by
assigning a node's id, which pytest 9 computes and no longer lets a plugin set, so every test became
a unit of its own and the module and class fixtures were built on both workers.)
"""

from __future__ import annotations

GROUPS = {"tests/cluster/": "cluster", "tests/paimon_spark/": "paimon-spark"}
# files of many independent classes, each with a project of its own: one unit per class
PER_CLASS = ("integration_tests/functional/test_dbt_upstream_on_paimon.py",)
FIRST = "integration_tests/functional/test_dbt_project.py"
DEFAULT_SECONDS = 5.0
SECONDS = {
    "integration_tests/functional/test_dbt_snapshots.py": 140,
    "integration_tests/functional/test_dbt_snapshots_upstream.py": 120,
    "integration_tests/functional/test_dbt_project.py": 130,
    "integration_tests/functional/test_dbt_incremental.py": 100,
    "integration_tests/functional/test_dbt_processes.py": 45,
    "integration_tests/functional/test_dbt_changes.py": 33,
    "integration_tests/functional/test_dbt_wap.py": 95,
    "integration_tests/functional/test_dbt_paimon_upsert.py": 38,
    "integration_tests/functional/test_dbt_append_tables.py": 20,
    "integration_tests/functional/test_dbt_basic.py": 24,
    "integration_tests/functional/test_dbt_merge.py": 21,
    "integration_tests/functional/test_dbt_containment.py": 20,
    "integration_tests/functional/test_dbt_maintenance.py": 16,
    "integration_tests/functional/test_dbt_object_store.py": 17,
    "integration_tests/functional/test_dbt_python_models.py": 17,
    "cluster": 129,
    "tests/packaging/test_wheel_smoke.py": 120,  # 60-240 s: how much of its install uv has cached
    "paimon-spark-0.9": 150,
    "paimon-spark-2.0": 240,
    "tests/key_index/test_key_index.py": 55,
    "tests/key_index/test_key_index_spark_job.py": 45,
    "tests/key_index/test_key_index_runs.py": 30,
    "tests/merge_engines/test_upsert_merge.py": 50,
    "tests/engine/test_maintenance.py": 85,
    "tests/engine/test_other_writers.py": 63,
    "tests/sql/test_statements.py": 137,
    "tests/sql/test_statement_forms.py": 50,
    "tests/sql/test_branches_sql.py": 45,
    "tests/engine/read/test_read_paths.py": 70,
    "tests/java_paimon/test_read_paths_java.py": 20,
    "tests/engine/read/test_lost_rows.py": 18,
    "tests/engine/read/test_changes.py": 60,
    "tests/key_index/test_key_index_kills.py": 38,
    "tests/engine/test_sequence_field.py": 43,
    "tests/engine/test_bucket_modes.py": 58,
    "tests/java_paimon/test_java_reads_ours.py": 24,
    "tests/engine/test_upsert.py": 48,
    "tests/engine/test_job.py": 36,
    "tests/engine/test_concurrent_writers.py": 27,
    "tests/engine/test_recommit.py": 30,
    "tests/sql/test_java_reads_statements.py": 22,
    "tests/sql/test_change_queries.py": 25,
    "tests/java_paimon/test_changelog.py": 61,
    "tests/java_paimon/test_deletion_vectors.py": 54,
    "tests/paimon_spark/test_deletion_vector_writers.py": 45,
    "tests/java_paimon/test_file_index.py": 7,
    "tests/java_paimon/test_maintenance_options.py": 2,
    "tests/java_paimon/test_postpone_bucket.py": 10,
    "tests/engine/test_float_keys.py": 24,
    "tests/engine/test_replace.py": 33,
    "tests/engine/read/test_first_row_reads.py": 23,
    "tests/engine/test_bucket_sizing.py": 21,
    "tests/java_paimon/test_we_read_java.py": 7,
    "tests/java_paimon/test_file_formats.py": 8,
    "tests/java_paimon/test_sequence_groups.py": 4,
    "tests/java_paimon/test_foreign_options.py": 3,
    "tests/java_paimon/test_external_paths.py": 2,
    "tests/java_paimon/test_java_maintains_ours.py": 14,
    "tests/java_paimon/test_listagg_distinct.py": 2,
    "tests/java_paimon/test_nested_types.py": 8,
    "tests/paimon_spark/test_nested_columns.py": 10,
    "tests/java_paimon/test_sequence_field.py": 16,
    "tests/java_paimon/test_append_tables.py": 24,
    "tests/store/test_expire.py": 12,
    "tests/store/test_object_store.py": 12,
    "tests/engine/test_bootstrap_pruning.py": 11,
    "tests/java_paimon/test_incremental_reads.py": 45,
    "tests/java_paimon/test_incremental_matrix.py": 60,
    "tests/java_paimon/test_changes_java.py": 20,
}


def group_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    if path in PER_CLASS:
        return "::".join(nodeid.split("::")[:2])
    for prefix, group in GROUPS.items():
        if path.startswith(prefix):
            # the connector's tests run against each release (tests/paimon_spark/conftest.py): a unit
            # per release, so that each worker may start one connector's Spark and the two share out
            if group == "paimon-spark":
                return f"{group}-2.0" if "[paimon-spark-2.0" in nodeid else f"{group}-0.9"
            return group
    return path


def order(items: list) -> list:
    """The items grouped by unit, units in the order they are to be handed out."""
    units: dict[str, list] = {}
    for item in items:
        units.setdefault(group_of(item.nodeid), []).append(item)

    def rank(unit: str):
        return (unit != FIRST, not unit.startswith("integration_tests/"), -SECONDS.get(unit, DEFAULT_SECONDS))
    return [item for unit in sorted(units, key=rank) for item in units[unit]]


def scheduler(config, log):
    """xdist's scope scheduling with this module's units as its scopes: a unit goes whole to one worker."""
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return Units(config, log)
