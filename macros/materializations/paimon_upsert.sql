{#--
  materialized='paimon_upsert' (or materialized='incremental', incremental_strategy='paimon_upsert'):
  the model's rows are upserted into a Paimon primary-key table by the dbt-paimon engine.

    unique_key       column or list of columns: the table's primary key (required)
    partition_by     column or list of columns: the table's partition keys (a key may move partitions)
    options          Paimon table options by their Paimon names: bucket, merge-engine, ...
    sequence_by      column whose highest value wins among rows of one key (older rows are skipped)
    on_schema_change ignore (default) | fail | append_new_columns | sync_all_columns
    execution        auto (default) | local | distributed: where the engine runs the job (see docs/dbt.md)
    key_index        true (default) | false: a cross-partition table's upsert looks its keys up in the
                     key index beside the table instead of reading every key (docs/architecture.md)
    full_refresh     rebuild the table from scratch (also --full-refresh)
    merge_update_columns / merge_exclude_columns / incremental_predicates: the merge strategy's
                     column rules (dbt_paimon/adapter/incremental.py)
--#}

{% materialization paimon_upsert, adapter='paimon', supported_languages=['sql', 'python'] %}
  {{ return(paimon_upsert_materialization('paimon_upsert')) }}
{% endmaterialization %}


{% macro paimon_upsert_materialization(materialization) %}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set existing_relation = load_cached_relation(this) -%}
  {#-- a `table` model is rebuilt every run --#}
  {%- set full_refresh = should_full_refresh() or materialization == 'table' -%}
  {%- set grant_config = config.get('grants') -%}
  {%- set on_schema_change = incremental_validate_on_schema_change(config.get('on_schema_change'), default='ignore') -%}
  {%- set tmp_relation = make_temp_relation(this, '__dbt_tmp') -%}
  {#-- everything the run cannot honour is settled before anything runs: a name leading out of the
       warehouse is refused, ignored configs and grants are warned about (never an error after the
       commit) --#}
  {%- do adapter.paimon_check_relation(target_relation) -%}
  {%- do adapter.paimon_warn_unsupported(model.config, materialization) -%}
  {%- do adapter.paimon_warn_grants(target_relation, grant_config) -%}

  {{ run_hooks(pre_hooks) }}

  {#-- a view, or a table that is not a Paimon table, under the model's name: replaced --#}
  {%- if existing_relation is not none and not (existing_relation.type == 'table' and adapter.paimon_table_exists(existing_relation)) -%}
    {% do adapter.drop_relation(existing_relation) %}
    {%- set existing_relation = none -%}
  {%- endif -%}

  {%- if model['language'] == 'python' -%}
    {#-- the model's code runs in the adapter's SparkSession and leaves its rows in the view --#}
    {%- do adapter.paimon_run_python_model(model, paimon_py_temp_view(compiled_code, tmp_relation)) -%}
  {%- else -%}
    {%- set sql = compiled_code -%}
    {%- if config.get('contract').enforced -%}
      {{ get_assert_columns_equivalent(sql) }}
    {%- endif -%}
  {%- endif -%}

  {#-- a SQL model's query runs in the adapter (a temporary view of its text would read the Paimon
       tables it names through the `paimon` source alone; spark.sql reads them natively) --#}
  {%- set response = adapter.paimon_upsert(
        target_relation, tmp_relation, model.config,
        sql=(compiled_code if model['language'] != 'python' else none),
        on_schema_change=on_schema_change,
        full_refresh=full_refresh,
        contract=({'constraints': model.constraints, 'columns': model.columns} if config.get('contract').enforced else none)) -%}
  {%- do store_result('main', response=response) -%}
  {#-- committed: the upstream changes this model read (paimon_changes) are consumed --#}
  {%- do adapter.paimon_consume_changes(target_relation) -%}

  {%- call statement('drop_tmp_relation') -%}
    drop view if exists {{ tmp_relation }}
  {%- endcall -%}

  {% do persist_docs(target_relation, model) %}

  {{ run_hooks(post_hooks) }}

  {{ return({'relations': [target_relation]}) }}
{% endmacro %}
