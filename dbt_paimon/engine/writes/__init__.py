"""The engine's writers: upsert, append and overwrite, delete and update, the rewrite of append tables,
compaction and the work after a commit, all committing through one loop (commit_loop.py)."""
