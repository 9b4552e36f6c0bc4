"""BucketAssigner and ExistingProcessor reproduce Paimon's cross-partition behaviour."""

import pytest

from dbt_paimon.assign.bucket_assigner import BucketAssigner
from dbt_paimon.assign.delete_existing_processor import DeleteExistingProcessor
from dbt_paimon.assign.global_index_assigner import existing_processor
from dbt_paimon.assign.skip_new_existing_processor import SkipNewExistingProcessor
from dbt_paimon.assign.use_old_existing_processor import UseOldExistingProcessor
from dbt_paimon.store import SchemaError


def _one_by_one(a: BucketAssigner, part, n):
    return [int(a.assign(part, 1)[0]) for _ in range(n)]


def test_reuses_lowest_non_full_bucket_then_creates_smallest_free_id():
    a = BucketAssigner(target_row_num=2)
    assert _one_by_one(a, "p", 5) == [0, 0, 1, 1, 2]
    a.decrement("p", 0)  # a key left bucket 0: its slot is reused before bucket 2 fills
    assert _one_by_one(a, "p", 2) == [0, 2]
    assert _one_by_one(a, "q", 1) == [0]  # counts are per partition


def test_assigner_only_uses_buckets_it_owns():
    a = BucketAssigner(target_row_num=1, num_assigners=3, assign_id=1)
    assert _one_by_one(a, "p", 3) == [1, 4, 7]
    b = BucketAssigner(target_row_num=1, num_assigners=3, assign_id=0)
    assert _one_by_one(b, "p", 2) == [0, 3]


def test_bootstrap_counts_and_foreign_buckets():
    a = BucketAssigner(target_row_num=3, num_assigners=2, assign_id=0)
    a.bootstrap("p", 0, 3)  # full
    a.bootstrap("p", 2, 1)  # two slots left
    a.bootstrap("p", 4, 0)
    a.bootstrap("p", 1, 1)  # owned by the other assigner: never reused
    assert _one_by_one(a, "p", 6) == [2, 2, 4, 4, 4, 6]


def test_batch_assignment_equals_one_by_one():
    for target, assigners, aid, boot in [(2, 1, 0, {}), (3, 4, 2, {2: 1, 6: 3, 3: 1}), (1, 2, 1, {1: 0})]:
        a, b = BucketAssigner(target, assigners, aid), BucketAssigner(target, assigners, aid)
        for bucket, n in boot.items():
            a.bootstrap("p", bucket, n)
            b.bootstrap("p", bucket, n)
        assert a.assign("p", 11).tolist() == _one_by_one(b, "p", 11)
        assert a.counts == b.counts


def test_invalid_settings():
    with pytest.raises(ValueError):
        BucketAssigner(0)
    with pytest.raises(ValueError):
        BucketAssigner(10, num_assigners=2, assign_id=2)


def test_existing_processor_by_merge_engine():
    assert type(existing_processor("deduplicate")) is DeleteExistingProcessor
    assert type(existing_processor("partial-update")) is UseOldExistingProcessor
    assert type(existing_processor("aggregation")) is UseOldExistingProcessor
    assert type(existing_processor("first-row")) is SkipNewExistingProcessor
    with pytest.raises(SchemaError):
        existing_processor("nope")
