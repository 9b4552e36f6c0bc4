{#-- `dbt clone` on this adapter (dbt_paimon/adapter/impl.py paimon_clone, store/clone.py):
     - a Paimon table in the state becomes a Paimon table of its own in the target: the source's
       latest snapshot, its data files shared (hard links on a local warehouse, server-side copies
       on an object store), no rows through Spark. The clone is independent: writes to either
       table never show in the other.
     - anything else (dbt-spark tables and views) becomes a view of the state's relation, as dbt
       does where a table cannot be cloned (dbt-spark's shallow clone needs Delta). --#}

{#-- a Paimon table can be cloned; a dbt-spark table cannot. A project's own can_clone_table() (dbt's
     switch) that says false makes every clone a view, as dbt does. --#}
{% macro paimon__can_clone_table() %}
  {{ return(defer_relation is defined and defer_relation is not none and adapter.paimon_table_exists(defer_relation)) }}
{% endmacro %}

{%- materialization clone, adapter='paimon' -%}
  {%- if defer_relation and adapter.paimon_table_exists(defer_relation) and can_clone_table() -%}
    {%- set target_relation = this.incorporate(type='table') -%}
    {%- set existing_relation = load_cached_relation(this) -%}
    {%- if existing_relation is not none and not (existing_relation.type == 'table' and adapter.paimon_table_exists(existing_relation)) -%}
      {%- if not flags.FULL_REFRESH -%}
        {{ log("Relation " ~ existing_relation ~ " already exists", info=True) }}
        {{ return({'relations': []}) }}
      {%- endif -%}
      {% do adapter.drop_relation(existing_relation) %}
    {%- endif -%}
    {%- if existing_relation is not none and not flags.FULL_REFRESH and adapter.paimon_table_exists(existing_relation) -%}
      {#-- no relation returned: dbt reports the node as a no-op, as for any clone target that exists --#}
      {{ log("Relation " ~ existing_relation ~ " already exists", info=True) }}
      {{ return({'relations': []}) }}
    {%- endif -%}
    {%- if target_relation.schema == defer_relation.schema and target_relation.identifier == defer_relation.identifier -%}
      {{ log("Target relation and defer relation are the same, skipping clone for relation: " ~ target_relation.render()) }}
      {{ return({'relations': []}) }}
    {%- endif -%}
    {%- do adapter.paimon_warn_grants(target_relation, config.get('grants')) -%}
    {%- set response = adapter.paimon_clone(target_relation, defer_relation, replace=flags.FULL_REFRESH) -%}
    {%- do store_result('main', response=response) -%}
    {% do persist_docs(target_relation, model) %}
    {{ return({'relations': [target_relation]}) }}
  {%- else -%}
    {{ return(materialization_clone_default()) }}
  {%- endif -%}
{%- endmaterialization -%}
