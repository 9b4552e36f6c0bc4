-- Orders of the current batch only.
select order_id, customer_id, amount, ordered_at
from {{ ref('orders') }}
where batch = {{ var('batch') }}
