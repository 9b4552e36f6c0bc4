{#-- materialized='incremental': incremental_strategy='paimon_upsert' keeps the model in a Paimon
     table (see paimon_upsert.sql); every other strategy is dbt-spark's incremental, unchanged. --#}

{% materialization incremental, adapter='paimon', supported_languages=['sql', 'python'] -%}
  {%- if config.get('incremental_strategy') == 'paimon_upsert' -%}
    {%- if model['language'] != 'sql' -%}
      {% do exceptions.raise_compiler_error("incremental_strategy='paimon_upsert' supports SQL models only") %}
    {%- endif -%}
    {{ return(paimon_upsert_materialization('incremental')) }}
  {%- else -%}
    {{ return(materialization_incremental_spark()) }}
  {%- endif -%}
{%- endmaterialization %}
