{#--
  materialized='paimon_upsert' (or materialized='incremental', incremental_strategy='paimon_upsert'):
  the model's rows are upserted into a Paimon primary-key table by the dbt-paimon engine.

    unique_key       column or list of columns: the table's primary key (required)
    partition_by     column or list of columns: the table's partition keys (a key may move partitions)
    options          Paimon table options by their Paimon names: bucket, merge-engine, ...
    sequence_by      column whose highest value wins among rows of one key (older rows are skipped)
    on_schema_change ignore (default) | fail | append_new_columns | sync_all_columns
    execution        auto (default) | local | distributed: where the engine runs the job (see docs/dbt.md)
    full_refresh     rebuild the table from scratch (also --full-refresh)
--#}

{% materialization paimon_upsert, adapter='paimon', supported_languages=['sql'] %}
  {{ return(paimon_upsert_materialization('paimon_upsert')) }}
{% endmaterialization %}


{% macro paimon_upsert_materialization(materialization) %}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set existing_relation = load_cached_relation(this) -%}
  {%- set full_refresh = should_full_refresh() -%}
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

  {%- set sql = compiled_code -%}
  {%- if config.get('contract').enforced -%}
    {{ get_assert_columns_equivalent(sql) }}
  {%- endif -%}
  {%- call statement('create_tmp_relation') -%}
    {{ create_temporary_view(tmp_relation, sql) }}
  {%- endcall -%}

  {%- set response = adapter.paimon_upsert(
        target_relation, tmp_relation,
        unique_key=config.get('unique_key'),
        partition_by=config.get('partition_by'),
        options=config.get('options'),
        sequence_by=config.get('sequence_by'),
        execution=config.get('execution'),
        on_schema_change=on_schema_change,
        full_refresh=full_refresh) -%}
  {%- do store_result('main', response=response) -%}

  {%- call statement('drop_tmp_relation') -%}
    drop view if exists {{ tmp_relation }}
  {%- endcall -%}

  {% do persist_docs(target_relation, model) %}

  {{ run_hooks(post_hooks) }}

  {{ return({'relations': [target_relation]}) }}
{% endmacro %}
