-- merge engine: aggregation. Each batch's orders are folded into the running totals by Paimon's
-- aggregate functions; two fixed buckets.
{{
    config(
        materialized='paimon_upsert',
        unique_key='customer_id',
        options={
            'merge-engine': 'aggregation',
            'bucket': 2,
            'fields.order_count.aggregate-function': 'sum',
            'fields.total_amount.aggregate-function': 'sum',
            'fields.largest_order.aggregate-function': 'max',
            'fields.first_order_at.aggregate-function': 'min',
            'fields.last_order_at.aggregate-function': 'max',
        }
    )
}}

select
    customer_id,
    count(*) as order_count,
    sum(amount) as total_amount,
    max(amount) as largest_order,
    min(ordered_at) as first_order_at,
    max(ordered_at) as last_order_at
from {{ ref('stg_orders') }}
group by customer_id
