{#-- materialized='table' with file_format='paimon': the model is rebuilt as a new Paimon primary-key
     table each run (its unique_key is the primary key), swapped in when complete; every other
     table model is dbt-spark's, unchanged. --#}

{% materialization table, adapter='paimon', supported_languages=['sql', 'python'] -%}
  {%- if adapter.paimon_table_format('table', config.get('file_format')) == 'paimon' -%}
    {{ return(paimon_upsert_materialization('table')) }}
  {%- else -%}
    {{ return(materialization_table_spark()) }}
  {%- endif -%}
{%- endmaterialization %}
