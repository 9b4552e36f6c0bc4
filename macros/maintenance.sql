{#--
  Table maintenance of Paimon tables, as run-operations or from other macros and hooks:

    dbt run-operation paimon_delete     --args '{relation: analytics.customers, where: "dt >= ''20230503''"}'
    dbt run-operation paimon_compact    --args '{relation: customers}'
    dbt run-operation paimon_expire     --args '{relation: customers, retain_max: 3, retain_min: 1, older_than: "1 h"}'
    dbt run-operation paimon_create_tag --args '{relation: customers, tag: v1, snapshot_id: 2, time_retained: "7 d"}'
    dbt run-operation paimon_delete_tag --args '{relation: customers, tag: v1}'
    dbt run-operation paimon_rollback   --args '{relation: customers, tag: v1}'     (or snapshot_id: 2)
    dbt run-operation paimon_remove_orphan_files --args '{relation: customers, older_than: "1 d", dry_run: true}'

  relation: a Relation (ref('customers'), this), 'schema.table', or 'table' (in the target's schema).
  Each logs what it did and returns a dict (snapshot_id, counts, message) for a calling macro:
  in a hook, call it with {% do ... %}, not {{ ... }} (which would render the dict as SQL).
  Nothing runs while dbt parses the project (execute is false).

  Reads, usable wherever SQL selects from a relation (a model, dbt show --inline, a test):

    select * from {{ paimon_as_of(ref('customers'), snapshot_id=3) }}      (or tag='v1')
    select * from {{ paimon_system_table(ref('customers'), 'snapshots') }}  (files, buckets, partitions, tags)

  Each returns a Spark temporary view of this dbt process (paimon__<schema>__<table>__snapshot_3,
  ..._tag_v1, ..._sys_snapshots), registered anew on every call; a persistent Spark view cannot
  select from a temporary one, so build such models as table, paimon_upsert or ephemeral.
--#}

{% macro paimon__require(operation, name, value, usage) %}
  {%- if value is none or (value is string and not (value | trim)) -%}
    {{ exceptions.raise_compiler_error(operation ~ ": missing argument " ~ name ~ ". Usage: " ~ usage) }}
  {%- endif -%}
{% endmacro %}


{% macro paimon__report(result) %}
  {%- if not result.get('warned') -%}{{ log(result['message'], info=True) }}{%- endif -%}
  {{ return(result) }}
{% endmacro %}


{% macro paimon_delete(relation=none, where=none) %}
  {%- set usage = "dbt run-operation paimon_delete --args '{relation: schema.table, where: \"dt >= ''20230503''\"}'" -%}
  {{ paimon__require('paimon_delete', 'relation', relation, usage) }}
  {{ paimon__require('paimon_delete', 'where', where, usage) }}
  {%- if not execute -%}{{ return(none) }}{%- endif -%}
  {{ return(paimon__report(adapter.paimon_delete(relation, where))) }}
{% endmacro %}


{% macro paimon_compact(relation=none) %}
  {{ paimon__require('paimon_compact', 'relation', relation, "dbt run-operation paimon_compact --args '{relation: schema.table}'") }}
  {%- if not execute -%}{{ return(none) }}{%- endif -%}
  {{ return(paimon__report(adapter.paimon_compact(relation))) }}
{% endmacro %}


{% macro paimon_expire(relation=none, retain_max=none, retain_min=none, older_than=none, max_deletes=none) %}
  {{ paimon__require('paimon_expire', 'relation', relation,
                     "dbt run-operation paimon_expire --args '{relation: schema.table, retain_max: 3, retain_min: 1, older_than: \"1 h\"}' (all but relation optional)") }}
  {%- if not execute -%}{{ return(none) }}{%- endif -%}
  {{ return(paimon__report(adapter.paimon_expire(relation, retain_max, retain_min, older_than, max_deletes))) }}
{% endmacro %}


{% macro paimon_create_tag(relation=none, tag=none, snapshot_id=none, time_retained=none, ignore_if_exists=false) %}
  {%- set usage = "dbt run-operation paimon_create_tag --args '{relation: schema.table, tag: v1}' (optional: snapshot_id, time_retained, ignore_if_exists)" -%}
  {{ paimon__require('paimon_create_tag', 'relation', relation, usage) }}
  {{ paimon__require('paimon_create_tag', 'tag', tag, usage) }}
  {%- if not execute -%}{{ return(none) }}{%- endif -%}
  {{ return(paimon__report(adapter.paimon_create_tag(relation, tag, snapshot_id, time_retained, ignore_if_exists))) }}
{% endmacro %}


{% macro paimon_delete_tag(relation=none, tag=none) %}
  {%- set usage = "dbt run-operation paimon_delete_tag --args '{relation: schema.table, tag: v1}'" -%}
  {{ paimon__require('paimon_delete_tag', 'relation', relation, usage) }}
  {{ paimon__require('paimon_delete_tag', 'tag', tag, usage) }}
  {%- if not execute -%}{{ return(none) }}{%- endif -%}
  {{ return(paimon__report(adapter.paimon_delete_tag(relation, tag))) }}
{% endmacro %}


{% macro paimon_remove_orphan_files(relation=none, older_than='1 d', dry_run=false) %}
  {%- set usage = "dbt run-operation paimon_remove_orphan_files --args '{relation: schema.table, older_than: \"1 d\", dry_run: true}' (older_than, dry_run optional)" -%}
  {{ paimon__require('paimon_remove_orphan_files', 'relation', relation, usage) }}
  {%- if not execute -%}{{ return(none) }}{%- endif -%}
  {{ return(paimon__report(adapter.paimon_remove_orphan_files(relation, older_than, dry_run))) }}
{% endmacro %}


{% macro paimon__one_of(operation, snapshot_id, tag) %}
  {%- if (snapshot_id is none) == (tag is none) -%}
    {{ exceptions.raise_compiler_error(operation ~ ": give exactly one of snapshot_id and tag"
                                       ~ (" (both were given)" if snapshot_id is not none else "")) }}
  {%- endif -%}
{% endmacro %}


{% macro paimon_rollback(relation=none, snapshot_id=none, tag=none) %}
  {{ paimon__require('paimon_rollback', 'relation', relation,
                     "dbt run-operation paimon_rollback --args '{relation: schema.table, tag: v1}' (or snapshot_id: 2)") }}
  {{ paimon__one_of('paimon_rollback', snapshot_id, tag) }}
  {%- if not execute -%}{{ return(none) }}{%- endif -%}
  {{ return(paimon__report(adapter.paimon_rollback(relation, snapshot_id, tag))) }}
{% endmacro %}


{% macro paimon_as_of(relation=none, snapshot_id=none, tag=none) %}
  {{ paimon__require('paimon_as_of', 'relation', relation, "{{ paimon_as_of(ref('customers'), snapshot_id=3) }} or tag='v1'") }}
  {{ paimon__one_of('paimon_as_of', snapshot_id, tag) }}
  {%- if not execute -%}{{ return(relation) }}{%- endif -%}
  {{ return(adapter.paimon_as_of(relation, snapshot_id, tag)) }}
{% endmacro %}


{% macro paimon_system_table(relation=none, name=none) %}
  {{ paimon__require('paimon_system_table', 'relation', relation, "{{ paimon_system_table(ref('customers'), 'snapshots') }}") }}
  {%- set known = ['snapshots', 'files', 'buckets', 'partitions', 'tags', 'options', 'schemas', 'manifests', 'consumers', 'branches', 'audit_log', 'binlog', 'ro'] -%}
  {%- if name is none or (name | string | lower | replace('$', '')) not in known -%}
    {{ exceptions.raise_compiler_error("paimon_system_table: unknown system table " ~ (name | string)
                                       ~ "; the system tables are " ~ known | join(', ')) }}
  {%- endif -%}
  {%- if not execute -%}{{ return(relation) }}{%- endif -%}
  {{ return(adapter.paimon_system_table(relation, name)) }}
{% endmacro %}
