"""store/common/groups.py: grouping rows by column values, without a Python loop per row."""

import numpy as np
import pyarrow as pa
import pytest

from dbt_paimon.store.common.groups import group_codes, group_runs


@pytest.mark.parametrize("low, high", [(0, 2), (0, 4000), (65530, 65536), (65530, 70000), (-5, 5)],
                         ids=["two", "thousands", "16-bit edge", "past 16 bits", "negative"])
def test_group_runs_is_a_stable_sort_of_any_integer_codes(low, high):
    """Codes that fit in 16 bits are sorted as such (numpy's radix sort); any others as they are:
    either way the order is the stable sort of the codes, and the runs cover each code once."""
    codes = np.random.default_rng(high).integers(low, high, 5000).astype(np.int64)
    order, runs = group_runs(codes)
    assert order.tolist() == np.argsort(codes, kind="stable").tolist()
    assert [int(codes[order[start]]) for start, _ in runs] == sorted(set(codes.tolist()))
    assert all((codes[order[start:end]] == codes[order[start]]).all() for start, end in runs)
    assert runs[0][0] == 0 and runs[-1][1] == len(codes)


def test_group_codes_number_each_combination_of_the_columns():
    table = pa.table({"p": ["a", "b", "a", None, "b"], "b": [1, 1, 1, 2, 2]})
    codes, groups = group_codes(table, ["p", "b"])
    assert [groups[c] for c in codes] == [("a", 1), ("b", 1), ("a", 1), (None, 2), ("b", 2)]
