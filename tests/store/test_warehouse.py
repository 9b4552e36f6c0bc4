"""The warehouse layout: names are single directory names, and the paths built from them stay
inside the warehouse, symbolic links included (issue 11, item 1)."""

import os

import pytest

from dbt_paimon.store import InvalidNameError
from dbt_paimon.store.warehouse import check_name, contain, database_path, table_path


@pytest.mark.parametrize("name", ["..", ".", "", "  ", "a/b", "../x", "/etc", "a\\b", "..\\x", "t$snapshots",
                                  ".spark", ".hidden", "a\x00b", "tab\tname", " padded", "x" * 201, None, 3])
def test_names_that_are_not_one_plain_directory_name_are_refused(name):
    with pytest.raises(InvalidNameError):
        check_name("table", name)


@pytest.mark.parametrize("name,expected", [("Customers", "customers"), ("my-model", "my-model"),
                                           ("a.b", "a.b"), ("naïve_名前", "naïve_名前"), ("x..y", "x..y")])
def test_plain_names_are_lower_cased(name, expected):
    assert check_name("table", name) == expected


def test_paths_are_built_inside_the_warehouse(tmp_path):
    wh = str(tmp_path / "wh")
    assert table_path(wh, "Sales", "Orders") == os.path.join(wh, "sales.db", "orders")
    assert database_path(wh, "sales") == os.path.join(wh, "sales.db")
    assert table_path("s3://lake/wh/", "db", "t") == "s3://lake/wh/db.db/t"
    with pytest.raises(InvalidNameError, match="contains '/'"):
        table_path(wh, "db", "/etc/passwd")  # os.path.join would have returned /etc/passwd
    with pytest.raises(InvalidNameError, match="starts with '.'"):
        database_path(wh, "..")


def test_a_symbolic_link_pointing_out_of_the_warehouse_is_refused(tmp_path):
    wh, outside = tmp_path / "wh", tmp_path / "outside"
    (wh / "db.db").mkdir(parents=True)
    (outside / "t").mkdir(parents=True)
    (wh / "db.db" / "inner").mkdir()
    os.symlink(outside / "t", wh / "db.db" / "linked")
    os.symlink(outside, wh / "other.db")
    os.symlink(wh / "db.db" / "inner", wh / "db.db" / "alias")  # a link that stays inside is fine
    with pytest.raises(InvalidNameError, match="outside the warehouse"):
        table_path(str(wh), "db", "linked")
    with pytest.raises(InvalidNameError, match="outside the warehouse"):
        table_path(str(wh), "other", "t")
    with pytest.raises(InvalidNameError, match="outside the warehouse"):
        database_path(str(wh), "other")
    assert table_path(str(wh), "db", "alias") == str(wh / "db.db" / "alias")
    # a warehouse reached through a link of its own is still itself
    os.symlink(wh, tmp_path / "wh-link")
    assert table_path(str(tmp_path / "wh-link"), "db", "t") == str(tmp_path / "wh-link" / "db.db" / "t")


def test_contain_on_object_store_paths():
    assert contain("s3://lake/wh", "s3://lake/wh/db.db/t", "t") == "s3://lake/wh/db.db/t"
    for path in ("s3://lake/wh/../other/t", "s3://lake/wh2/t", "gs://lake/wh/db.db/t", "s3://lake/wh"):
        with pytest.raises(InvalidNameError):
            contain("s3://lake/wh", path, "t")
