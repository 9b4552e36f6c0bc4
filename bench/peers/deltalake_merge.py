"""delta-rs (`deltalake`): MERGE on id, when matched update all, when not matched insert all, into a
Delta table partitioned by dt. The merge predicate is on id alone, so an update may move a row to
another partition, as in the cross-partition model. Read-back: deltalake's own reader."""

from __future__ import annotations

import importlib.metadata
import os

import pyarrow.parquet as pq

from peers.base import Peer as Base


class Peer(Base):
    label = "delta-rs MERGE"
    note = "deltalake MERGE on id (update all / insert all), partitioned by dt"

    def available(self):
        try:
            import deltalake  # noqa: F401
        except ImportError as e:
            return f"deltalake not installed ({e})"
        return None

    def versions(self):
        return {"deltalake": importlib.metadata.version("deltalake")}

    def _path(self, work_dir):
        return os.path.join(work_dir, "delta")

    def setup(self, work_dir, base_path):
        from deltalake import write_deltalake
        write_deltalake(self._path(work_dir), pq.read_table(base_path), partition_by=["dt"])

    def upsert(self, work_dir, batch):
        from deltalake import DeltaTable
        metrics = (DeltaTable(self._path(work_dir))
                   .merge(source=batch, predicate="t.id = s.id", source_alias="s", target_alias="t")
                   .when_matched_update_all().when_not_matched_insert_all().execute())
        return {k: metrics[k] for k in ("num_target_rows_inserted", "num_target_rows_updated",
                                        "num_target_files_added", "num_target_files_removed") if k in metrics}

    def read_back(self, work_dir):
        from deltalake import DeltaTable
        return DeltaTable(self._path(work_dir)).to_pyarrow_table()
