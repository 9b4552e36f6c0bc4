"""Spark's catalog follows the warehouse (what a dbt process does when its first connection opens):
tables written elsewhere appear, evolved ones are re-declared, deleted ones disappear, and an entry
that is not ours is never replaced."""

import os
import shutil

from pyspark.sql import types as T

from dbt_paimon.engine.writes import schema_change
from dbt_paimon.sql import catalog
from dbt_paimon.engine import upsert
from dbt_paimon.store import FileStoreTable


class TestCatalogSync:
    def test_sync_creates_replaces_and_drops_entries(self, project):
        adapter = project.adapter
        with adapter.connection_named("__test"):
            spark = adapter.spark()
        warehouse = adapter.config.credentials.warehouse
        schema = f"{project.test_schema}_sync"
        path = catalog.table_path(warehouse, schema, "written_elsewhere")
        # a table written without dbt (the engine directly), then a sync as at a process start
        upsert(spark.createDataFrame([(1, "a")], "id bigint, name string"), path, primary_keys="id")
        assert catalog.sync(spark, warehouse)["created"] >= 1
        assert spark.sql(f"select * from {schema}.written_elsewhere").collect() == [(1, "a")]

        # evolved elsewhere: the entry is declared again with the new column
        table = FileStoreTable.open(path)
        schema_change.commit(path, schema_change.evolve(table.schema, add=[T.StructField("extra", T.StringType())]))
        catalog.sync(spark, warehouse)
        assert spark.table(f"{schema}.written_elsewhere").columns == ["id", "name", "extra"]
        assert spark.sql(f"select * from {schema}.written_elsewhere").collect() == [(1, "a", None)]

        # a view of the same name as another Paimon table: kept, with a warning
        spark.sql(f"create view {schema}.clash as select 1 as id")
        upsert(spark.createDataFrame([(2,)], "id bigint"), catalog.table_path(warehouse, schema, "clash"),
               primary_keys="id")
        assert catalog.sync(spark, warehouse)["conflicts"] == 1
        assert catalog.catalog_entry(spark, schema, "clash").is_view

        # a session's temporary view (a failed model's, a macro's) is in no schema: Spark lists it
        # with every schema, dbt must not (`dbt docs generate` fails on a relation without a schema)
        spark.sql("create or replace temporary view leftover__dbt_tmp as select 1 as id")
        with adapter.connection_named("__test"):
            listed = adapter.list_relations_without_caching(adapter.Relation.create(schema=schema))
        assert sorted(r.identifier for r in listed) == ["clash", "written_elsewhere"]
        spark.catalog.dropTempView("leftover__dbt_tmp")

        # deleted from the warehouse: the entry goes
        shutil.rmtree(path)
        assert catalog.sync(spark, warehouse)["dropped"] == 1
        assert catalog.catalog_entry(spark, schema, "written_elsewhere") is None

        # dbt's drop_schema removes the Paimon database too
        with adapter.connection_named("__test"):
            adapter.drop_schema(adapter.Relation.create(schema=schema))
        assert not os.path.exists(catalog.schema_dir(warehouse, schema))
        assert not spark.catalog.databaseExists(schema)
