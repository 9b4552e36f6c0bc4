-- Downstream of the Paimon table: read through the paimon source (merge-on-read) like any table.
{{ config(materialized='table') }}

select
    c.country,
    n.country_name,
    count(*) as customers,
    sum(c.lifetime_value) as lifetime_value
from {{ ref('customers') }} c
join {{ ref('countries') }} n on n.country_code = c.country
group by c.country, n.country_name
