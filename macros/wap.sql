{#--
  Branches of Paimon tables, and write-audit-publish (dbt_paimon/adapter/wap.py, docs/dbt.md):

    dbt build --vars '{paimon_branch: audit_0412}'      every Paimon model, seed and snapshot written on
                                                        that branch of its table; ref() and tests read it
    on-run-end: "{% do paimon_publish(results) %}"      (dbt_project.yml) main fast-forwarded to the
                                                        branch, only when every node passed

    dbt run-operation paimon_publish       --args '{branch: audit_0412}'   (finish a publish that stopped)
    dbt run-operation paimon_create_branch --args '{relation: schema.table, branch: b}'  (optional: tag, snapshot_id)
    dbt run-operation paimon_fast_forward  --args '{relation: schema.table, branch: b}'
    dbt run-operation paimon_delete_branch --args '{relation: schema.table, branch: b}'
--#}

{% macro paimon_publish(results=none, branch=none) %}
  {%- set branch = branch or var('paimon_branch', none) -%}
  {%- if not execute or not branch -%}{{ return(none) }}{%- endif -%}
  {%- if results is none -%}
    {#-- a run-operation: every Paimon table of the warehouse that has the branch --#}
    {{ return(paimon__report(adapter.paimon_publish(branch, none, []))) }}
  {%- endif -%}
  {%- set written = [] -%}
  {%- set failed = [] -%}
  {%- for result in results -%}
    {%- if result.status in ('error', 'fail', 'skipped', 'runtime error') -%}
      {%- do failed.append(result.node.unique_id ~ ' (' ~ result.status ~ ')') -%}
    {%- elif result.node.resource_type in ('model', 'seed', 'snapshot') -%}
      {%- do written.append(result.node.schema ~ '.' ~ (result.node.alias or result.node.name)) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(paimon__report(adapter.paimon_publish(branch, written, failed))) }}
{% endmacro %}


{% macro paimon_create_branch(relation=none, branch=none, tag=none, snapshot_id=none) %}
  {%- set usage = "dbt run-operation paimon_create_branch --args '{relation: schema.table, branch: b}' (optional: tag, snapshot_id; default: from the latest snapshot)" -%}
  {{ paimon__require('paimon_create_branch', 'relation', relation, usage) }}
  {{ paimon__require('paimon_create_branch', 'branch', branch, usage) }}
  {%- if not execute -%}{{ return(none) }}{%- endif -%}
  {{ return(paimon__report(adapter.paimon_create_branch(relation, branch, tag, snapshot_id))) }}
{% endmacro %}


{% macro paimon_fast_forward(relation=none, branch=none) %}
  {%- set usage = "dbt run-operation paimon_fast_forward --args '{relation: schema.table, branch: b}'" -%}
  {{ paimon__require('paimon_fast_forward', 'relation', relation, usage) }}
  {{ paimon__require('paimon_fast_forward', 'branch', branch, usage) }}
  {%- if not execute -%}{{ return(none) }}{%- endif -%}
  {{ return(paimon__report(adapter.paimon_fast_forward(relation, branch))) }}
{% endmacro %}


{% macro paimon_delete_branch(relation=none, branch=none) %}
  {%- set usage = "dbt run-operation paimon_delete_branch --args '{relation: schema.table, branch: b}'" -%}
  {{ paimon__require('paimon_delete_branch', 'relation', relation, usage) }}
  {{ paimon__require('paimon_delete_branch', 'branch', branch, usage) }}
  {%- if not execute -%}{{ return(none) }}{%- endif -%}
  {{ return(paimon__report(adapter.paimon_delete_branch(relation, branch))) }}
{% endmacro %}
