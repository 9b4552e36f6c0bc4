-- After batch var('batch'), customers holds exactly the expected rows (no more, no fewer).
{% set columns = 'customer_id, name, country, tier, lifetime_value, updated_at, loaded_in_batch' %}
with expected as (
    select {{ columns }} from {{ ref('expected_customers') }} where after_batch = {{ var('batch') }}
),
actual as (
    select {{ columns }} from {{ ref('customers') }}
)
(select 'missing' as problem, * from (select * from expected except select * from actual))
union all
(select 'unexpected' as problem, * from (select * from actual except select * from expected))
