{#-- dbt-spark's relation macros, made aware of Paimon tables (a Paimon table is files in the
    warehouse plus a catalog entry that reads them). Everything else is dbt-spark's. --#}

{% macro paimon__drop_relation(relation) -%}
  {#-- a name that would reach files outside the warehouse is refused before anything runs --#}
  {% do adapter.paimon_check_relation(relation) %}
  {%- if relation.type != 'view' and (relation.is_paimon or adapter.paimon_table_exists(relation)) -%}
    {#-- drops the catalog entry and deletes the table's files --#}
    {% do adapter.paimon_drop_table(relation) %}
  {%- else -%}
    {{ spark__drop_relation(relation) }}
  {%- endif -%}
{%- endmacro %}


{% macro paimon__create_schema(relation) -%}
  {% do adapter.paimon_check_relation(relation) %}
  {{ spark__create_schema(relation) }}
  {#-- the Paimon database: <warehouse>/<schema>.db --#}
  {% do adapter.paimon_create_schema(relation) %}
{%- endmacro %}


{% macro paimon__drop_schema(relation) -%}
  {% do adapter.paimon_check_relation(relation) %}
  {{ spark__drop_schema(relation) }}
  {% do adapter.paimon_drop_schema(relation) %}
{%- endmacro %}


{% macro paimon__rename_relation(from_relation, to_relation) -%}
  {% do adapter.paimon_check_relation(from_relation) %}
  {% do adapter.paimon_check_relation(to_relation) %}
  {%- if from_relation.is_paimon or adapter.paimon_table_exists(from_relation) -%}
    {% do exceptions.raise_compiler_error("dbt-paimon cannot rename the Paimon table " ~ from_relation ~ " to " ~ to_relation) %}
  {%- else -%}
    {{ spark__rename_relation(from_relation, to_relation) }}
  {%- endif -%}
{%- endmacro %}


{% macro paimon__persist_docs(relation, model, for_relation, for_columns) -%}
  {%- if relation.type != 'view' and (relation.is_paimon or adapter.paimon_table_exists(relation)) -%}
    {#-- into the Paimon schema (table comment, field descriptions), read by every Paimon reader,
         and from there into Spark's catalog --#}
    {%- set for_columns = for_columns and config.persist_column_docs() -%}
    {%- set documented = {'description': model.description, 'columns': model.columns} -%}
    {%- if for_columns and model.columns -%}
      {#-- documented columns the table lacks: warned about and left out, as dbt's own persist_docs does --#}
      {%- set existing = adapter.get_columns_in_relation(relation) | map(attribute="name") | list -%}
      {%- do documented.update({'columns': validate_doc_columns(relation, model.columns, existing)}) -%}
    {%- endif -%}
    {% do adapter.paimon_persist_docs(relation, documented,
                                      for_relation and config.persist_relation_docs(), for_columns) %}
  {%- else -%}
    {{ spark__persist_docs(relation, model, for_relation, for_columns) }}
  {%- endif -%}
{%- endmacro %}


{#-- dbt's is_incremental() is not dispatched: this one (an adapter macro wins over dbt's) also
     answers for paimon_upsert models. True on a later run of a model whose Paimon table exists. --#}
{% macro is_incremental() %}
  {% if not execute %}
    {{ return(False) }}
  {% endif %}
  {% set materialized = model.config.materialized %}
  {% set paimon = materialized == 'paimon_upsert'
                  or (materialized == 'incremental' and config.get('incremental_strategy') == 'paimon_upsert') %}
  {% if materialized not in ('incremental', 'paimon_upsert') or should_full_refresh() %}
    {{ return(False) }}
  {% endif %}
  {% set relation = adapter.get_relation(this.database, this.schema, this.table) %}
  {% if relation is none or relation.type != 'table' %}
    {{ return(False) }}
  {% endif %}
  {{ return(adapter.paimon_table_exists(relation) if paimon else True) }}
{% endmacro %}


{#-- A Paimon warehouse on a filesystem or object store has no grants (nor has Spark's local
     catalog): dbt's grant step warns once per model instead of failing after the model's table
     was written. paimon_upsert models warn before their commit and do not come here. --#}
{% macro paimon__apply_grants(relation, grant_config, should_revoke=True) %}
  {% do adapter.paimon_warn_grants(relation, grant_config) %}
{% endmacro %}

{#-- dbt-spark applies an enforced contract's constraints with ALTER TABLE whenever file_format is
     delta, its default there, so a parquet `table` model with a not_null constraint failed on
     ALTER COLUMN. Here they are applied to delta tables only; on other Spark formats they are
     warned about. A Paimon model's primary_key and not_null are enforced by the engine
     (adapter/constraints.py). --#}
{% macro paimon__persist_constraints(relation, model) %}
  {%- if config.get('contract').enforced -%}
    {%- set file_format = config.get('file_format') or 'parquet' -%}
    {%- if file_format == 'delta' -%}
      {% do spark__persist_constraints(relation, model) %}
    {%- else -%}
      {%- set kinds = [] -%}
      {%- for c in model.constraints -%}{% do kinds.append(c.type) %}{%- endfor -%}
      {%- for col in model.columns.values() -%}
        {%- for c in col.constraints -%}{% do kinds.append(c.type ~ ' on ' ~ col.name) %}{%- endfor -%}
      {%- endfor -%}
      {%- if kinds -%}
        {% do exceptions.warn(relation ~ ": constraints " ~ (kinds | join(', ')) ~ " are not enforced on a " ~ file_format
              ~ " table (Spark cannot alter its columns); with file_format='paimon' primary_key and not_null are") %}
      {%- endif -%}
    {%- endif -%}
  {%- endif -%}
{% endmacro %}
