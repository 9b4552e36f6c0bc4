"""The `type: paimon` profile: dbt-spark's in-process `session` method plus where the Paimon tables live.

    my_project:
      target: dev
      outputs:
        dev:
          type: paimon
          schema: analytics
          warehouse: ./paimon_warehouse      # path or file: URI (relative to the dbt project), or
                                             # s3://bucket/path (also s3a://, gs://, abfs://)
          storage_options:                   # the object store's settings, by Paimon's option names
            s3.endpoint: http://127.0.0.1:9000   # (without them: the store's standard environment)
            s3.access-key: "{{ env_var('S3_KEY') }}"
            s3.secret-key: "{{ env_var('S3_SECRET') }}"
          master: local[*]
          server_side_parameters:            # any Spark setting, passed through as in dbt-spark
            spark.driver.memory: 4g
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple
from urllib.parse import urlparse

from dbt.adapters.spark.connections import SparkConnectionMethod, SparkCredentials
from dbt_common.exceptions import DbtRuntimeError

from ..engine import local_session
from ..store import did_you_mean, fileio

DEFAULT_WAREHOUSE = "paimon_warehouse"
DEFAULT_MASTER = "local[*]"
SPARK_DIR_NAME = ".spark"  # inside the warehouse: Spark's own (non-Paimon) tables and their catalog records
# With a warehouse on an object store, Spark's tables and records (local files, locked with flock)
# live in the dbt project instead.
PROJECT_SPARK_DIR = os.path.join(".dbt_paimon", "spark")
TABLES_DIR_NAME = "tables"  # <spark_dir>/tables: spark.sql.warehouse.dir
LOG4J_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
LOG_FILE_PROPERTY = "dbt_paimon.log.file"
DEFAULT_LOCK_TIMEOUT = 600
# A paimon profile's own keys (docs/dbt.md "Profile reference"; dbt takes `type` and `threads`
# itself): what a misspelt key is compared with
PROFILE_KEYS = ("schema", "warehouse", "storage_options", "master", "spark_dir", "lock_timeout",
                "server_side_parameters")

# Settings a running SparkSession cannot change: they are used when the session starts and are not
# sent again with every statement (Spark would log a warning for each).
STATIC_PREFIXES = ("spark.master", "spark.app.", "spark.driver.", "spark.executor.", "spark.jars",
                   "spark.sql.warehouse.dir", "spark.sql.catalogImplementation", "spark.sql.extensions",
                   "spark.ui.", "spark.pyspark.", "spark.python.", "spark.local.", "spark.log.", "spark.hadoop.",
                   "spark.serializer", "spark.kryo", "spark.memory.", "spark.default.parallelism",
                   "spark.sql.hive.", "spark.sql.catalog.spark_catalog", "spark.task.")


def quote_option(option: str) -> str:
    """One option for spark.driver.extraJavaOptions, quoted as Spark's launcher reads it when it has
    spaces or quotes (paths may)."""
    if re.search(r'[\s"\'\\]', option):
        return '"' + option.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return option


def java_option(name: str, value: str) -> str:
    """`-Dname=value` for spark.driver.extraJavaOptions."""
    return quote_option(f"-D{name}={value}")


def local_dir(value: str, base: str, what: str = "spark_dir") -> str:
    """An absolute local path for a profile path or `file:` URI (relative paths are taken from base)."""
    if value.startswith("file:"):
        value = urlparse(value).path or value[5:]
    elif re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", value):
        raise DbtRuntimeError(f"{what} {value!r}: must be a local path or a file: URI")
    value = os.path.expanduser(value)
    return os.path.normpath(value if os.path.isabs(value) else os.path.join(base, value))


@dataclass
class PaimonCredentials(SparkCredentials):
    method: SparkConnectionMethod = SparkConnectionMethod.SESSION  # type: ignore[assignment]
    host: Optional[str] = "local"
    warehouse: str = DEFAULT_WAREHOUSE
    master: str = DEFAULT_MASTER
    # Where Spark keeps the tables it writes itself (seeds, `table` models) and the records of its
    # relations every dbt process reads (spark_relations.py); default <warehouse>/.spark, so they
    # travel with the warehouse.
    spark_dir: Optional[str] = None
    # Seconds a dbt process waits for another one writing the same Spark relation (locks.py)
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    # The object store's settings (Paimon's names: s3.endpoint, s3.access-key, s3.secret-key,
    # s3.region, s3.path.style.access; commit.lock). Never logged, never stored with a table.
    storage_options: Optional[Dict[str, Any]] = None

    @classmethod
    def validate(cls, data: Any) -> None:
        """dbt's check of a profile target (aliases translated), then ours: a key that names no
        setting is refused, since dbt-spark would drop it (`warehous:` would write to the default
        warehouse)."""
        super().validate(data)
        for key in data if isinstance(data, dict) else ():
            if key not in cls.__dataclass_fields__:
                hint = did_you_mean(str(key), PROFILE_KEYS) or f" ({', '.join(PROFILE_KEYS)})"
                raise DbtRuntimeError(f"profile key {key!r} is not a paimon setting{hint}")

    def __post_init__(self) -> None:
        if self.method != SparkConnectionMethod.SESSION:
            raise DbtRuntimeError(
                f"type: paimon runs Spark inside the dbt process (method: session); got method: {self.method}")
        super().__post_init__()
        unknown = [k for k in (self.storage_options or {}) if not fileio.is_storage_option(str(k))]
        if unknown:
            raise DbtRuntimeError(
                f"storage_options {unknown}: not store settings (Paimon's names: s3.endpoint, s3.access-key, "
                f"s3.secret-key, s3.region, s3.path.style.access, fs.s3.*, gcs.*, azure.*, commit.lock); table "
                f"options belong in a model's options config")
        self._resolved_from: Optional[str] = None
        self.resolve_paths(os.getcwd())

    def storage_settings(self) -> Dict[str, str]:
        return {str(k): str(v) for k, v in (self.storage_options or {}).items() if v is not None}

    @property
    def type(self) -> str:
        return "paimon"

    @property
    def unique_field(self) -> str:
        return self.warehouse

    def _connection_keys(self) -> Tuple[str, ...]:
        return ("schema", "warehouse", "master", "spark_dir")

    # ---- paths ---------------------------------------------------------------------------------
    def resolve_paths(self, project_root: Optional[str]) -> None:
        """Make warehouse and spark_dir absolute, relative paths being taken from the dbt project
        (or the working directory when there is no project, as in `dbt debug --connection`)."""
        base = project_root or os.getcwd()
        raw = getattr(self, "_raw_paths", None)
        if raw is None:
            raw = self._raw_paths = (self.warehouse, self.spark_dir)
        warehouse, spark_dir = raw
        warehouse = warehouse or DEFAULT_WAREHOUSE
        if fileio.scheme_of(warehouse):
            if fileio.scheme_of(warehouse) not in fileio.OBJECT_STORE_SCHEMES:
                raise DbtRuntimeError(
                    f"warehouse {warehouse!r}: a local path, a file: URI, or an object store URI "
                    f"({', '.join(s + '://' for s in fileio.OBJECT_STORE_SCHEMES)})")
            self.warehouse = warehouse.rstrip("/")
            default_spark_dir = os.path.join(base, PROJECT_SPARK_DIR)
        else:
            self.warehouse = local_dir(warehouse, base, "warehouse")
            default_spark_dir = os.path.join(self.warehouse, SPARK_DIR_NAME)
        self.spark_dir = local_dir(spark_dir, base) if spark_dir else default_spark_dir
        self._resolved_from = base

    # ---- Spark settings ------------------------------------------------------------------------
    def spark_settings(self, log_file: Optional[str] = None) -> Dict[str, str]:
        """Every setting the SparkSession starts with: ours, then the profile's (which win).
        log_file: where log4j writes Spark's log (log4j2.properties reads it as dbt_paimon.log.file)."""
        ours = [java_option("derby.system.home", self.spark_dir),
                java_option("log4j2.configurationFile", "file:" + LOG4J_CONFIG)]
        if log_file:
            ours.append(java_option(LOG_FILE_PROPERTY, log_file))
        settings = {
            "spark.master": self.master,
            "spark.app.name": "dbt-paimon",
            # one catalog per process, rebuilt from the warehouse and spark_dir when it opens
            # (session.py, spark_relations.py): no metastore that admits one process at a time
            "spark.sql.catalogImplementation": "in-memory",
            "spark.sql.warehouse.dir": os.path.join(self.spark_dir, TABLES_DIR_NAME),
            # a Spark table's partitions are its directories, which every process sees; partitions
            # kept in one process's catalog would be invisible to the others
            "spark.sql.hive.manageFilesourcePartitions": "false",
            "spark.driver.extraJavaOptions": " ".join(ours),
            "spark.ui.showConsoleProgress": "false",
            "spark.ui.enabled": "false",
            # timestamps are instants in Paimon (TIMESTAMP WITH LOCAL TIME ZONE): render and parse
            # them the same on every machine
            "spark.sql.session.timeZone": "UTC",
        }
        user: Dict[str, Any] = dict(self.server_side_parameters)
        java = user.get("spark.driver.extraJavaOptions")
        if java:
            extra = [o for o in ours if o.split("=", 1)[0] not in java]
            user["spark.driver.extraJavaOptions"] = " ".join([java, *extra])
        settings.update({k: str(v) for k, v in user.items()})
        # A local master's (local_session.py): Python workers forked with the engine imported, when
        # they run this interpreter (session.build gives them PYSPARK_PYTHON, else the profile's
        # spark.pyspark.python, else this one), and task results handed over directly; the
        # profile's own values win
        python = os.environ.get("PYSPARK_PYTHON") or settings.get("spark.pyspark.python") or sys.executable
        return {**local_session.session_settings(settings.get("spark.master"), python), **settings}

    def statement_settings(self) -> Dict[str, str]:
        """What dbt-spark's session cursor applies to the running session with every statement."""
        return {k: v for k, v in self.server_side_parameters.items() if not k.startswith(STATIC_PREFIXES)}
