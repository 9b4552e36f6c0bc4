-- aggregation: the table holds the aggregates of every order of every batch so far.
with expected as (
    select
        customer_id,
        count(*) as order_count,
        sum(amount) as total_amount,
        max(amount) as largest_order,
        min(ordered_at) as first_order_at,
        max(ordered_at) as last_order_at
    from {{ ref('orders') }}
    where batch <= {{ var('batch') }}
    group by customer_id
),
actual as (
    select customer_id, order_count, total_amount, largest_order, first_order_at, last_order_at
    from {{ ref('customer_order_totals') }}
)
(select 'missing' as problem, * from (select * from expected except select * from actual))
union all
(select 'unexpected' as problem, * from (select * from actual except select * from expected))
