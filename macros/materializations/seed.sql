{#-- A seed with file_format='paimon' is a Paimon append table (adapter/seeds.py): each `dbt seed` builds it
     anew with the CSV's rows in one snapshot, typed as dbt-spark types a seed's columns (or by
     column_types); dbt's seed materialization calls these three steps. Other seeds are dbt-spark's. --#}

{% macro paimon__create_csv_table(model, agate_table) %}
  {%- if adapter.paimon_table_format('seed', model['config'].get('file_format')) == 'paimon' -%}
    {{ return(paimon_seed_table(model, agate_table)) }}
  {%- endif -%}
  {{ return(spark__create_csv_table(model, agate_table)) }}
{% endmacro %}


{% macro paimon__reset_csv_table(model, full_refresh, old_relation, agate_table) %}
  {%- if adapter.paimon_table_format('seed', model['config'].get('file_format')) == 'paimon' -%}
    {#-- a Paimon table is replaced once the new one is committed, never dropped first --#}
    {%- if old_relation is not none and not adapter.paimon_table_exists(old_relation) -%}
      {{ adapter.drop_relation(old_relation) }}
    {%- endif -%}
    {{ return(paimon_seed_table(model, agate_table)) }}
  {%- endif -%}
  {{ return(spark__reset_csv_table(model, full_refresh, old_relation, agate_table)) }}
{% endmacro %}


{% macro paimon__load_csv_rows(model, agate_table) %}
  {%- if adapter.paimon_table_format('seed', model['config'].get('file_format')) == 'paimon' -%}
    {{ return('-- the rows were written with the Paimon table') }}
  {%- endif -%}
  {{ return(spark__load_csv_rows(model, agate_table)) }}
{% endmacro %}


{% macro paimon_seed_table(model, agate_table) %}
  {%- do adapter.paimon_check_relation(this) -%}
  {%- do adapter.paimon_warn_unsupported(model['config'], 'seed') -%}
  {%- set column_override = model['config'].get('column_types', {}) -%}
  {%- set types = [] -%}
  {%- for col_name in agate_table.column_names -%}
    {%- do types.append(column_override.get(col_name, adapter.convert_type(agate_table, loop.index0))) -%}
  {%- endfor -%}
  {%- set response = adapter.paimon_seed(this.incorporate(type='table'), agate_table, types, model['config']) -%}
  {{ return('-- ' ~ response._message) }}
{% endmacro %}
