"""The table formats a dbt-on-Spark user weighs dbt-paimon against, as Spark SQL: one Format each.

Each names its Spark line (spark_side.LINES), the session settings its connector needs, and the
statements that create a table of the bench's schema (partitioned by dt), load the base, apply the
batch and compact. Tables live under one root directory (`root`): a format's catalog warehouse or
its path-named tables, so a peer's work dir holds all of its table and nothing else.

The batch is applied as dbt-spark's `merge` strategy emits it for `unique_key='id'`:
`MERGE INTO t USING batch ON t.id = batch.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN
INSERT *`. The condition is on id alone, so a row whose dt changed is updated into its new partition
and the key lives once: the `cross` model (model.py). Paimon's connector has no MERGE need: the batch
is `INSERT INTO` its cross-partition table (primary key id, bucket -1), whose writer does the same.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

COLUMNS = ("id BIGINT NOT NULL, dt STRING, name STRING, qty INT, price DOUBLE, active BOOLEAN, "
           "updated_at TIMESTAMP_NTZ")
DELTA_CONF = {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
              "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}


@dataclass(frozen=True)
class Format:
    name: str
    label: str
    line: str                        # the Spark line: "4.1" or "4.0"
    props: str = ""                  # TBLPROPERTIES of the created table (the format's mode)
    # False where a table's metadata holds absolute paths (Iceberg): a copy would still point at
    # the original's files, so run.py sets up each round's table anew instead of copying one
    copyable: bool = True
    claims_paimon_name = False       # see PaimonSpark
    versions: dict = field(default_factory=dict)

    def conf(self, root: str) -> dict:
        """The session settings: the connector's extensions and a catalog over `root`."""
        return dict(DELTA_CONF)

    def ident(self, tag: str) -> str:
        """The table's own name, from the format's and the tag's: formats share a root in read bench."""
        return f"{self.name}_{tag}".replace("-", "_").replace(".", "_")

    def table(self, root: str, tag: str) -> str:
        return f"delta.`{os.path.abspath(os.path.join(root, 'delta', self.ident(tag)))}`"

    def create(self, root: str, tag: str) -> list[str]:
        props = f" TBLPROPERTIES ({self.props})" if self.props else ""
        return [f"CREATE TABLE {self.table(root, tag)} ({COLUMNS}) USING delta PARTITIONED BY (dt){props}"]

    def load(self, root: str, tag: str, source: str) -> str:
        return f"INSERT INTO {self.table(root, tag)} SELECT * FROM {source}"

    def upsert(self, root: str, tag: str, batch: str) -> str:
        t = self.table(root, tag)
        return f"MERGE INTO {t} AS t USING {batch} ON t.id = {batch}.id " \
               "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"

    def compact(self, root: str, tag: str) -> list[str]:
        return [f"OPTIMIZE {self.table(root, tag)}"]


class Iceberg(Format):
    """A Hadoop catalog `ice` in the work dir; table properties pick copy-on-write or merge-on-read
    for merge, update and delete alike (format version 2, the default's)."""

    def conf(self, root):
        return {"spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
                "spark.sql.catalog.ice": "org.apache.iceberg.spark.SparkCatalog",
                "spark.sql.catalog.ice.type": "hadoop",
                "spark.sql.catalog.ice.warehouse": os.path.abspath(os.path.join(root, "iceberg"))}

    def table(self, root, tag):
        return f"ice.db.{self.ident(tag)}"

    def create(self, root, tag):
        return [f"CREATE TABLE {self.table(root, tag)} ({COLUMNS}) USING iceberg PARTITIONED BY (dt) "
                f"TBLPROPERTIES ({self.props})"]

    def compact(self, root, tag):
        """Every data file rewritten ('rewrite-all': the default skips groups of fewer than 5
        files, which leaves a small table as it was), then for merge-on-read the position deletes."""
        name = self.table(root, tag).split(".", 1)[1]
        out = [f"CALL ice.system.rewrite_data_files(table => '{name}', options => map('rewrite-all', 'true'))"]
        if "merge-on-read" in self.props:
            out.append(f"CALL ice.system.rewrite_position_delete_files(table => '{name}', "
                       "options => map('rewrite-all', 'true'))")
        return out


class PaimonSpark(Format):
    """Paimon's own connector: a catalog `pm` over the work dir, the cross-partition table."""

    # Its jar registers the data source name `paimon` in the JVM, and Spark then refuses dbt-paimon's
    # Python source of that name (DATA_SOURCE_ALREADY_EXISTS): dbt-paimon reads in a session of its own
    claims_paimon_name = True

    def conf(self, root):
        return {"spark.sql.extensions": "org.apache.paimon.spark.extensions.PaimonSparkSessionExtensions",
                "spark.sql.catalog.pm": "org.apache.paimon.spark.SparkCatalog",
                "spark.sql.catalog.pm.warehouse": "file:" + os.path.abspath(os.path.join(root, "paimon"))}

    def table(self, root, tag):
        return f"pm.db.{self.ident(tag)}"

    def create(self, root, tag):
        return ["CREATE DATABASE IF NOT EXISTS pm.db",
                f"CREATE TABLE {self.table(root, tag)} ({COLUMNS}) PARTITIONED BY (dt) TBLPROPERTIES ({self.props})"]

    def upsert(self, root, tag, batch):
        return f"INSERT INTO {self.table(root, tag)} SELECT * FROM {batch}"

    def compact(self, root, tag):
        # Paimon 2.0.0 refuses this on a KEY_DYNAMIC (bucket -1 cross-partition) table:
        # "Spark compact with KEY_DYNAMIC is not support yet"; the caller reports the refusal
        name = self.table(root, tag).split(".", 1)[1]
        return [f"CALL pm.sys.compact(table => '{name}')"]


MOR = ", ".join(f"'write.{op}.mode' = 'merge-on-read'" for op in ("merge", "update", "delete"))
COW = ", ".join(f"'write.{op}.mode' = 'copy-on-write'" for op in ("merge", "update", "delete"))
FORMATS = {f.name: f for f in [
    Format("delta-merge", "Delta MERGE (Spark)", "4.1", versions={"delta-spark": "4.2.0"}),
    Format("delta-merge-dv", "Delta MERGE, deletion vectors", "4.1", "'delta.enableDeletionVectors' = 'true'",
           versions={"delta-spark": "4.2.0"}),
    Iceberg("iceberg-merge-cow", "Iceberg MERGE copy-on-write", "4.1", f"'format-version' = '2', {COW}",
            copyable=False, versions={"iceberg-spark-runtime-4.1": "1.11.0"}),
    Iceberg("iceberg-merge-mor", "Iceberg MERGE merge-on-read", "4.1", f"'format-version' = '2', {MOR}",
            copyable=False, versions={"iceberg-spark-runtime-4.1": "1.11.0"}),
    PaimonSpark("paimon-spark-2.0", "paimon-spark 2.0 (Paimon SQL)", "4.0", "'primary-key' = 'id', 'bucket' = '-1'",
                versions={"paimon-spark-4.0": "2.0.0"}),
]}
