-- first-row: each customer keeps the version of the first batch it appeared in.
with first_batch as (
    select customer_id, min(batch) as batch
    from {{ ref('customer_updates') }}
    where batch <= {{ var('batch') }}
    group by customer_id
),
expected as (
    select u.customer_id, u.name, u.country as first_country, u.tier as first_tier, u.updated_at as first_seen_at
    from {{ ref('customer_updates') }} u
    join first_batch f on f.customer_id = u.customer_id and f.batch = u.batch
),
actual as (
    select customer_id, name, first_country, first_tier, first_seen_at from {{ ref('customer_first_seen') }}
)
(select 'missing' as problem, * from (select * from expected except select * from actual))
union all
(select 'unexpected' as problem, * from (select * from actual except select * from expected))
