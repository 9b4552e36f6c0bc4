-- Profile changes of the current batch only: a null means "not part of this update".
select customer_id, email, phone, newsletter
from {{ ref('profile_updates') }}
where batch = {{ var('batch') }}
