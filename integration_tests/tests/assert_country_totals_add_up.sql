-- The downstream model agrees with the Paimon table it reads.
select 'totals differ' as problem
from (select count(*) as n, sum(lifetime_value) as v from {{ ref('customers') }}) c
cross join (select sum(customers) as n, sum(lifetime_value) as v from {{ ref('customers_by_country') }}) d
where c.n != d.n or c.v != d.v
