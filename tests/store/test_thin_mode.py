"""Data files in Paimon's thin mode (`data-file.thin-mode`, as pypaimon-rust writes them) hold no
_KEY_* copies: the key is read from the value columns, with the same result."""

import pyarrow as pa
import pyarrow.parquet as pq

from dbt_paimon.store.table import FileStoreTable

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])


def test_files_without_key_copies_read_the_same(table_path):
    t = FileStoreTable.create(table_path, SCHEMA, ["id", "dt"], ["dt"], {"bucket": "1"})
    for tag in ("a", "b"):
        w = t.new_write()
        w.write(pa.Table.from_pylist([{"id": i, "dt": "x", "v": f"{tag}{i}"} for i in range(0, 10, 1 if tag == "a"
                                                                                          else 3)], SCHEMA))
        w.commit()
    expected = t.to_arrow().sort_by("id").to_pylist()
    for split in t.plan().splits:
        for f in split.files:  # rewrite every file as thin mode would have written it
            path = f"{split.bucket_path}/{f.file_name}"
            table = pq.ParquetFile(path).read()  # not read_table: it would take dt=x as a hive partition
            pq.write_table(table.drop_columns(["_KEY_id"]), path)
    assert "_KEY_id" not in pq.read_schema(path).names
    assert FileStoreTable.open(table_path).to_arrow().sort_by("id").to_pylist() == expected
    assert [r["v"] for r in expected] == ["b0", "a1", "a2", "b3", "a4", "a5", "b6", "a7", "a8", "b9"]
