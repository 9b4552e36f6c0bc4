"""Maintenance of a table's history: snapshot and partition expiration, the deletion of the files no
snapshot or tag needs any more, orphan files, rollback."""
