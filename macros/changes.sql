{#--
  paimon_changes(ref('orders')): the rows of `orders` that changed since this model last ran, one
  per key, with their row kind in a first column `rowkind` (+I, +U, -D); the first run and
  --full-refresh read every row (as +I). The model is a Paimon consumer of `orders` (consumer id
  `dbt-<schema>.<model>`, or consumer_id=...): snapshot expiration keeps what it has not read, and
  its position moves only when its own table committed (dbt_paimon/adapter/changes.py).

    {{ config(materialized='paimon_upsert', unique_key='id', options={'rowkind.field': 'rowkind'}) }}
    select * from {{ paimon_changes(ref('orders')) }}
--#}
{% macro paimon_changes(relation=none, consumer_id=none) %}
  {{ paimon__require('paimon_changes', 'relation', relation, "select * from {{ paimon_changes(ref('orders')) }}") }}
  {%- if not execute -%}{{ return(relation) }}{%- endif -%}
  {{ return(adapter.paimon_changes(relation, this, model.config, consumer_id, should_full_refresh())) }}
{% endmacro %}
