{#-- materialized='incremental' keeps the model in a Paimon table (see paimon_upsert.sql) when
     file_format='paimon', or incremental_strategy is 'merge' or 'paimon_upsert' (both an upsert on
     unique_key; adapter/incremental.py says which is which); every other model is dbt-spark's
     incremental, unchanged. --#}

{% materialization incremental, adapter='paimon', supported_languages=['sql', 'python'] -%}
  {%- if adapter.paimon_table_format('incremental', config.get('file_format'), config.get('incremental_strategy')) == 'paimon' -%}
    {{ return(paimon_upsert_materialization('incremental')) }}
  {%- else -%}
    {{ return(materialization_incremental_spark()) }}
  {%- endif -%}
{%- endmaterialization %}
