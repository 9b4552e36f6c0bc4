-- One row per customer, partitioned by country: a customer who moves country moves partition.
-- merge engine: deduplicate (Paimon's default); sequence_by: an update older than the stored one is skipped.
{{
    config(
        materialized='paimon_upsert',
        unique_key='customer_id',
        partition_by='country',
        sequence_by='updated_at',
        options={'dynamic-bucket.target-row-num': 4},
        post_hook="insert into {{ target.schema }}.run_log select '{{ this.identifier }}', {{ var('batch') }}, current_timestamp()"
    )
}}

select
    customer_id,
    name,
    country,
    tier,
    lifetime_value,
    updated_at,
    batch as loaded_in_batch
from {{ ref('stg_customer_updates') }}
{% if is_incremental() %}
-- only the batches that arrived since the last run: {{ this }} is the Paimon table itself
where batch > (select coalesce(max(loaded_in_batch), 0) from {{ this }})
{% endif %}
