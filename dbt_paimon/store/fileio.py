"""FileIO: the few filesystem operations the store needs, with Paimon's atomicity rules.

Snapshot and schema files must be created only if absent and never be seen half-written: they are
written to a hidden temp file first and then hard-linked into place (link(2) fails if the target
exists, atomically). Hints (LATEST, EARLIEST) are replaced atomically with rename(2).

Local (and mounted shared) filesystems only; `file:` URIs are accepted.
"""

from __future__ import annotations

import os
import uuid
from urllib.parse import urlparse


def local_path(path: str) -> str:
    if path.startswith("file:"):
        parsed = urlparse(path)
        return parsed.path or path[5:]
    if "://" in path:
        raise ValueError(f"warehouse {path!r}: only local or mounted paths (or file: URIs) are supported")
    return path


class FileIO:
    def exists(self, path: str) -> bool:
        return os.path.exists(local_path(path))

    def read_bytes(self, path: str) -> bytes:
        with open(local_path(path), "rb") as f:
            return f.read()

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def mkdirs(self, path: str) -> None:
        os.makedirs(local_path(path), exist_ok=True)

    def _temp_beside(self, path: str) -> str:
        p = local_path(path)
        d, name = os.path.split(p)
        os.makedirs(d, exist_ok=True)
        return os.path.join(d, f".{name}.{uuid.uuid4().hex}.tmp")

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a new immutable file (manifest, index); readers never see it partially."""
        tmp = self._temp_beside(path)
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, local_path(path))

    def write_exclusive(self, path: str, text: str) -> bool:
        """Create `path` with `text` only if absent; False when another writer got there first."""
        tmp = self._temp_beside(path)
        try:
            with open(tmp, "wb") as f:
                f.write(text.encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, local_path(path))
            except FileExistsError:
                return False
            return True
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass

    def overwrite_text(self, path: str, text: str) -> None:
        """Replace a hint file atomically."""
        tmp = self._temp_beside(path)
        with open(tmp, "wb") as f:
            f.write(text.encode("utf-8"))
        os.replace(tmp, local_path(path))

    def list_names(self, directory: str) -> list[str]:
        try:
            return [n for n in os.listdir(local_path(directory)) if not n.startswith(".")]
        except FileNotFoundError:
            return []

    def delete(self, path: str) -> bool:
        try:
            os.unlink(local_path(path))
            return True
        except FileNotFoundError:
            return False

    def size(self, path: str) -> int:
        return os.path.getsize(local_path(path))

    def local(self, path: str) -> str:
        return local_path(path)
