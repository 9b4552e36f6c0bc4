{#--
  dbt snapshots on dbt-paimon: a snapshot is always a Paimon primary-key table keyed on dbt_scd_id.

  dbt-core decides what changed, with its own macros, as on every adapter: the strategy
  (timestamp, check or a custom one), hard_deletes (ignore | invalidate | new_record),
  dbt_valid_to_current and snapshot_meta_column_names all go through its build_snapshot_table /
  snapshot_staging_table. Where other adapters then MERGE, the change set becomes one upsert by
  the engine (adapter/snapshots.py): closing versions and opening the next ones is one Paimon
  snapshot, and a run that changes nothing writes nothing.

    file_format   unset or 'paimon'; anything else is refused (docs/dbt.md, "Snapshots")
    partition_by  column or list of columns of the snapshot table: its Paimon partition keys
    options       Paimon table options (bucket, snapshot.num-retained.*, ...), as for paimon_upsert
    execution     auto (default) | local | distributed
--#}

{% materialization snapshot, adapter='paimon' %}
  {%- set strategy_name = config.get('strategy') -%}
  {%- set grant_config = config.get('grants') -%}
  {%- set columns = config.get('snapshot_table_column_names') or get_snapshot_table_column_names() -%}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set existing_relation = load_cached_relation(this) -%}

  {#-- the configuration is checked before any hook or statement runs: a name leading out of the
       warehouse, another file_format, an invalid hard_deletes, a config the table cannot take --#}
  {%- do adapter.paimon_check_relation(target_relation) -%}
  {%- do adapter.paimon_warn_unsupported(model.config, 'snapshot') -%}
  {%- do adapter.paimon_snapshot_check(target_relation, model.config, columns) -%}
  {%- do adapter.paimon_warn_grants(target_relation, grant_config) -%}

  {%- set target_exists = adapter.paimon_table_exists(target_relation) -%}
  {%- if existing_relation is not none and not target_exists -%}
    {#-- a snapshot's history cannot be rebuilt from its source: never dropped implicitly --#}
    {% do exceptions.raise_compiler_error(
        "snapshot " ~ target_relation ~ ": a " ~ existing_relation.type ~ " that is not a Paimon table exists under "
        ~ "the snapshot's name; dbt-paimon keeps snapshots in Paimon tables and does not drop the " ~ existing_relation.type
        ~ " for you. Drop it (or give the snapshot another name) and run again") %}
  {%- endif -%}

  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}

  {#-- the query against the config (updated_at, check_cols, unique_key, partition_by, meta column
       names) and an existing table against the config: still before anything is written --#}
  {%- do adapter.paimon_snapshot_check(target_relation, model.config, columns, sql) -%}

  {% set strategy_macro = strategy_dispatch(strategy_name) %}
  {% set strategy = strategy_macro(model, "snapshotted_data", "source_data", model['config'], target_exists) %}

  {%- set stored_relation = none -%}
  {%- if not target_exists -%}
    {%- set rows_sql = build_snapshot_table(strategy, model['compiled_code']) -%}
  {%- else -%}
    {{ adapter.assert_valid_snapshot_target_given_strategy(target_relation, columns, strategy) }}
    {#-- dbt-core's change set: rows marked insert / update / delete, with dbt_scd_id. It reads the
         table's rows several times: from a view Spark keeps after the first read --#}
    {%- set stored_relation = adapter.paimon_snapshot_stored(target_relation) -%}
    {%- set rows_sql = snapshot_staging_table(strategy, sql, stored_relation) -%}
  {%- endif -%}

  {%- set tmp_relation = make_temp_relation(this, '__dbt_snapshot') -%}
  {%- call statement('build_snapshot_staging_relation') -%}
    {{ create_temporary_view(tmp_relation, rows_sql) }}
  {%- endcall -%}

  {%- set response = adapter.paimon_snapshot(
        target_relation, tmp_relation, columns,
        created=not target_exists,
        stored=stored_relation,
        partition_by=config.get('partition_by'),
        options=config.get('options'),
        execution=config.get('execution'),
        valid_to_current=config.get('dbt_valid_to_current')) -%}
  {%- do store_result('main', response=response) -%}

  {%- call statement('drop_snapshot_staging_relation') -%}
    drop view if exists {{ tmp_relation }}
  {%- endcall -%}

  {% do persist_docs(target_relation, model) %}

  {{ run_hooks(post_hooks, inside_transaction=True) }}
  {{ adapter.commit() }}
  {{ run_hooks(post_hooks, inside_transaction=False) }}

  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}


{#-- dbt-core's staging query for hard_deletes='new_record' takes a deletion record's columns from
     the stored version by their names: get_list_of_column_names(get_columns_in_relation(this)).
     dbt-spark's get_columns_in_relation returns the rows of `describe extended`, whose names come
     out Undefined, so every deletion record would lose the columns of the version it follows.
     This returns Columns, as dbt-core's macro promises and every other adapter does; nothing
     else in dbt-core or dbt-spark calls the macro. --#}
{% macro paimon__get_columns_in_relation(relation) -%}
  {{ return(adapter.get_columns_in_relation(relation)) }}
{%- endmacro %}
