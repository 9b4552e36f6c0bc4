"""Snapshots and tags: the snapshot files and `LATEST`/`EARLIEST` hints (`SnapshotManager`), tags, and
the tags Paimon creates on its own (`tag.automatic-creation`)."""
