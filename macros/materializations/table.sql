{#-- materialized='table' with file_format='paimon': the model is rebuilt as a new Paimon primary-key
     table each run (its unique_key is the primary key), swapped in when complete; every other
     table model is dbt-spark's. --#}

{% materialization table, adapter='paimon', supported_languages=['sql', 'python'] -%}
  {%- if adapter.paimon_table_format('table', config.get('file_format')) == 'paimon' -%}
    {{ return(paimon_upsert_materialization('table')) }}
  {%- elif model['language'] == 'python' -%}
    {{ return(paimon_python_spark_table()) }}
  {%- else -%}
    {{ return(materialization_table_spark()) }}
  {%- endif -%}
{%- endmaterialization %}

{#-- dbt-spark's `table` steps for a Python model, with its `statement` called from this adapter's
     materialization itself: dbt runs Python only from a statement directly inside a
     materialization, and dbt-spark's would be one macro deeper here. The model's code runs in
     the adapter's session (adapter/python_models.py) and writes with py_write_table. --#}
{% macro paimon_python_spark_table() %}
  {%- set target_relation = api.Relation.create(identifier=model['alias'], schema=schema, database=database,
                                                type='table') -%}
  {%- set old_relation = adapter.get_relation(database=database, schema=schema, identifier=model['alias']) -%}
  {{ run_hooks(pre_hooks) }}
  {%- if old_relation is not none -%}
    {{ adapter.drop_relation(old_relation) }}
  {%- endif -%}
  {%- set response = adapter.paimon_run_python_model(model, py_write_table(compiled_code, target_relation)) -%}
  {%- do store_result('main', response=response) -%}
  {% do apply_grants(target_relation, config.get('grants'), should_revoke(old_relation, full_refresh_mode=True)) %}
  {% do persist_docs(target_relation, model) %}
  {% do persist_constraints(target_relation, model) %}
  {{ run_hooks(post_hooks) }}
  {{ return({'relations': [target_relation]}) }}
{% endmacro %}
