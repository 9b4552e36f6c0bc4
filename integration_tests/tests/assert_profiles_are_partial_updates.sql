-- partial-update: each column holds the latest non-null value any batch so far gave it.
with updates as (
    select * from {{ ref('profile_updates') }} where batch <= {{ var('batch') }}
),
expected as (
    select
        customer_id,
        max_by(email, case when email is not null then batch end) as email,
        max_by(phone, case when phone is not null then batch end) as phone,
        max_by(newsletter, case when newsletter is not null then batch end) as newsletter
    from updates
    group by customer_id
),
actual as (
    select customer_id, email, phone, newsletter from {{ ref('customer_profiles') }}
)
(select 'missing' as problem, * from (select * from expected except select * from actual))
union all
(select 'unexpected' as problem, * from (select * from actual except select * from expected))
