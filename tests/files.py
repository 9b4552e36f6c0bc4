"""Byte-level snapshots of directories, for tests that must show nothing changed."""

import hashlib
import os


def fingerprint(root) -> dict:
    """Every file, directory and link under root: its bytes' hash, modification time and mode."""
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            st = os.lstat(p)
            data = b""
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    data = f.read()
            out[os.path.relpath(p, root)] = (hashlib.sha256(data).hexdigest(), st.st_mtime_ns, st.st_mode)
    return out
