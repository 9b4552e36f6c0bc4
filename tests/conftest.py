import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def warehouse(tmp_path):
    """A fresh filesystem warehouse; tables live at <warehouse>/db.db/<name> as Paimon's catalog expects."""
    os.makedirs(tmp_path / "wh" / "db.db")
    return str(tmp_path / "wh")


@pytest.fixture
def table_path(warehouse):
    return os.path.join(warehouse, "db.db", "t")
