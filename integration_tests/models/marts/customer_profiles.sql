-- merge engine: partial-update. Each batch fills in what it knows; a null keeps the stored value.
{{
    config(
        materialized='paimon_upsert',
        unique_key='customer_id',
        options={'merge-engine': 'partial-update'}
    )
}}

select customer_id, email, phone, newsletter
from {{ ref('stg_profile_updates') }}
