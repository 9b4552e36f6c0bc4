-- customers' post-hook logged this batch's run.
select 'no run_log row for this batch' as problem
where not exists (
    select 1 from {{ target.schema }}.run_log where model = 'customers' and batch = {{ var('batch') }}
)
