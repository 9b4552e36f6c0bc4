-- The raw customer feed as it stands after batch var('batch'): every update that has arrived so far.
select
    batch,
    customer_id,
    name,
    country,
    tier,
    lifetime_value,
    updated_at
from {{ ref('customer_updates') }}
where batch <= {{ var('batch') }}
