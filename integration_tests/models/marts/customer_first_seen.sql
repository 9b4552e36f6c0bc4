-- merge engine: first-row. The first version of each customer is kept; later ones are skipped.
{{
    config(
        materialized='paimon_upsert',
        unique_key='customer_id',
        options={'merge-engine': 'first-row'}
    )
}}

select
    customer_id,
    name,
    country as first_country,
    tier as first_tier,
    updated_at as first_seen_at
from {{ ref('stg_customer_updates') }}
where batch = {{ var('batch') }}
