"""BinaryRow bytes must equal what Paimon (here: pypaimon's serializer) produces, type by type."""

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import given, settings, strategies as st

from dbt_paimon.store.common import binary_row
from dbt_paimon.store.common.types import parse_type

CASES = [
    ("BOOLEAN", [True, False, None]),
    ("TINYINT", [-128, 0, 127]),
    ("SMALLINT", [-32768, 7, 32767]),
    ("INT", [-(2**31), 42, 2**31 - 1]),
    ("BIGINT", [-(2**63), 1, 2**63 - 1]),
    ("FLOAT", [1.5, -0.25, None]),
    ("DOUBLE", [3.141592653589793, -1e300, 0.0]),
    ("DECIMAL(10, 2)", [Decimal("1.50"), Decimal("-99999999.99"), None]),
    ("DECIMAL(38, 6)", [Decimal("12345678901234567890123456789012.123456"), Decimal("-1.000001"), Decimal("0.000000")]),
    ("STRING", ["", "d1", "seven77", "a longer string of text", "ünïcödé", None]),
    ("BYTES", [b"", b"\x00\x01", b"12345678901", None]),
    ("DATE", [dt.date(1970, 1, 1), dt.date(2024, 2, 29), dt.date(1900, 1, 1)]),
    ("TIMESTAMP(3)", [dt.datetime(2024, 1, 1, 1, 2, 3, 456000), dt.datetime(1969, 12, 31, 23, 59, 59)]),
    ("TIMESTAMP(6)", [dt.datetime(2024, 1, 1, 1, 2, 3, 456789), dt.datetime(1960, 5, 5, 5, 5, 5, 5)]),
]


def _pypaimon_bytes(values, type_strings):
    from pypaimon.schema.data_types import AtomicType, DataField
    from pypaimon.table.row.generic_row import GenericRow, GenericRowSerializer

    fields = [DataField(i, f"f{i}", AtomicType(t)) for i, t in enumerate(type_strings)]
    return GenericRowSerializer.to_bytes(GenericRow(list(values), fields))


@pytest.mark.parametrize("type_string,values", CASES)
def test_single_field_rows_match_pypaimon(type_string, values):
    t = parse_type(type_string)
    for v in values:
        ours = binary_row.serialize([v], [t])
        assert ours == _pypaimon_bytes([v], [type_string]), (type_string, v)
        back = binary_row.deserialize(ours, [t])[0]
        assert back == v or (v is None and back is None)


def test_multi_field_row_with_variable_part_matches_pypaimon():
    types = ["STRING", "BIGINT", "STRING", "DECIMAL(20, 2)", "TIMESTAMP(6)", "BYTES"]
    values = ["a string longer than seven", 5, "short", Decimal("123456789012345678.12"),
              dt.datetime(2023, 5, 3, 10, 0, 0, 1), b"0123456789abcdef"]
    ours = binary_row.serialize(values, [parse_type(t) for t in types])
    assert ours == _pypaimon_bytes(values, types)
    assert list(binary_row.deserialize(ours, [parse_type(t) for t in types])) == values


def test_documented_partition_example():
    # ../shared/paimon-format.md: partition ('d1',) = 00000001 00*8 'd1' 00*5 82
    assert (binary_row.serialize(["d1"], [parse_type("STRING")])
            == bytes.fromhex("00000001" + "00" * 8) + b"d1" + bytes(5) + b"\x82")


def test_epoch_nanos_keep_sub_microsecond_precision():
    t = parse_type("TIMESTAMP(9)")
    raw = binary_row.serialize([1_700_000_000_123_456_789], [t])
    millis_slot = int.from_bytes(raw[4 + 8:4 + 16], "little")
    assert millis_slot & 0xFFFFFFFF == 456_789  # nanos of the millisecond stay in the slot


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=30)), min_size=1, max_size=6),
       st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), min_size=1, max_size=4))
def test_random_rows_round_trip_and_match_pypaimon(strings, ints):
    types = ["STRING"] * len(strings) + ["BIGINT"] * len(ints)
    values = strings + ints
    ours = binary_row.serialize(values, [parse_type(t) for t in types])
    assert ours == _pypaimon_bytes(values, types)
    assert list(binary_row.deserialize(ours, [parse_type(t) for t in types])) == values
