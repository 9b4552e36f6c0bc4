"""FileIO: the few file operations the store needs, with Paimon's atomicity rules, on a local disk
or an object store (S3 and S3-compatible stores, GCS, Azure), as Paimon's FileIO is.

Snapshot, schema and tag files must be created only if absent and never be seen half-written:
- local disk: written to a hidden temp file, then hard-linked into place (link(2) fails if the
  target exists, atomically); hints (LATEST, EARLIEST) are replaced with rename(2);
- object store (object_store.py): one conditional PUT (`If-None-Match: *` on S3 and Azure,
  generation match 0 on GCS); an object is never visible half-written, so other files are plain PUTs.

`FileIO.get(path)` picks the implementation by the path's scheme. This module names no object-store
implementation: object_store.py registers its FileIO here when it loads, and the store package
loads it (store/__init__.py), as Paimon's FileIO.get finds its FileIOLoaders by discovery. Store
settings (endpoint, credentials) come from `configure()` (the dbt profile, or the Python API's
`storage_options`), else from the store's standard environment (AWS_* variables, ...). A FileIO is
picklable, so the driver hands it to Spark tasks with the settings they need; its repr never shows
a secret.
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ContextManager, Iterator, Mapping
from urllib.parse import urlparse

import pyarrow as pa

OBJECT_STORE_SCHEMES = ("s3", "s3a", "s3n", "gs", "gcs", "abfs", "abfss", "az", "azure")

_configured: dict[str, str] = {}  # process-wide store settings (Paimon's option names)
_configured_lock = threading.Lock()


def configure(options: Mapping[str, object] | None) -> None:
    """Store settings for every object-store FileIO this process makes without explicit ones
    (Paimon's names: s3.endpoint, s3.access-key, s3.secret-key, s3.region, s3.path.style.access;
    fs.* and commit.lock). Replaces what was configured before."""
    with _configured_lock:
        _configured.clear()
        _configured.update({str(k): str(v) for k, v in (options or {}).items() if v is not None})


STORAGE_OPTION_PREFIXES = ("s3.", "fs.", "gcs.", "azure.")


def is_storage_option(key: str) -> bool:
    """A store setting (endpoint, credentials, commit lock), never a table option: it must not be
    stored with the table, where every reader of the warehouse would see it."""
    return key.startswith(STORAGE_OPTION_PREFIXES) or key == "commit.lock"


_object_store_io: type | None = None  # the FileIO of OBJECT_STORE_SCHEMES (object_store.ObjectStoreFileIO)


def register_object_store_io(io_class: type) -> None:
    """Called by object_store.py when it loads: FileIO.get makes this class for object-store paths."""
    global _object_store_io
    _object_store_io = io_class


def configured() -> dict[str, str]:
    with _configured_lock:
        return dict(_configured)


def scheme_of(path: str) -> str:
    """'' for local paths and file: URIs, else the URI scheme (lower case)."""
    if "://" not in path:
        return ""
    scheme = path.split("://", 1)[0].lower()
    return "" if scheme == "file" else scheme


def local_path(path: str) -> str:
    if path.startswith("file:"):
        parsed = urlparse(path)
        return parsed.path or path[5:]
    if "://" in path:
        raise ValueError(f"{path!r} is not a local path")
    return path


@dataclass(frozen=True)
class FileStatus:
    path: str  # full path, in the FileIO's own spelling
    size: int
    mtime_ms: int
    is_dir: bool


class FileIO(ABC):
    """The interface; `get()` gives the implementation for a path."""

    @staticmethod
    def get(path: str, options: Mapping[str, object] | None = None) -> "FileIO":
        scheme = scheme_of(path)
        if not scheme:
            return LocalFileIO()
        if scheme not in OBJECT_STORE_SCHEMES:
            raise ValueError(f"{path!r}: unsupported scheme {scheme}:// (supported: a local path, file:, "
                             f"{', '.join(s + '://' for s in OBJECT_STORE_SCHEMES)})")
        if _object_store_io is None:  # cannot happen: importing this module imports the store package
            raise RuntimeError("the object-store FileIO is not loaded (import dbt_paimon.store)")
        with _configured_lock:
            settings = dict(_configured) if options is None else {str(k): str(v) for k, v in options.items()}
        return _object_store_io(settings)

    @property
    def is_object_store(self) -> bool:
        return False

    @abstractmethod
    def exists(self, path: str) -> bool: ...

    @abstractmethod
    def read_bytes(self, path: str) -> bytes: ...

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    @abstractmethod
    def mkdirs(self, path: str) -> None: ...

    @abstractmethod
    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a new immutable file (manifest, index); readers never see it partially."""

    @abstractmethod
    def write_exclusive(self, path: str, text: str) -> bool:
        """Create `path` with `text` only if absent; False when another writer got there first."""

    @abstractmethod
    def overwrite_text(self, path: str, text: str) -> None:
        """Replace a hint file atomically."""

    @abstractmethod
    def list_names(self, directory: str) -> list[str]:
        """Names directly under `directory` (files and sub-directories), hidden ones left out."""

    @abstractmethod
    def list_status(self, directory: str, recursive: bool = False) -> Iterator[FileStatus]:
        """Files (and, when not recursive, sub-directories) under `directory`, hidden names too;
        symbolic links are neither followed nor listed."""

    @abstractmethod
    def delete(self, path: str) -> bool: ...

    @abstractmethod
    def delete_empty_directory(self, path: str) -> bool:
        """Remove an empty directory; False when it is not empty or gone (or, on an object store,
        which has no directories, always)."""

    @abstractmethod
    def size(self, path: str) -> int: ...

    @abstractmethod
    def mtime_ms(self, path: str) -> int: ...

    @abstractmethod
    def open_input(self, path: str):
        """What pyarrow's Parquet reader opens: a local path or an in-memory buffer."""

    @abstractmethod
    def output(self, path: str) -> ContextManager["pa.NativeFile"]:
        """A pyarrow output stream (its tell() is the bytes written so far) that becomes the file
        `path` when the block ends without error."""

    # a no-op where a store creates files only if absent
    def check_commit_safety(self, table_path: str) -> None:  # noqa: B027
        """Raise when this store cannot create a file only if absent (see object_store.py)."""

    def copy_file(self, source: str, target: str) -> None:
        """`target` with `source`'s bytes, as cheaply as the store allows (a clone's data files:
        Paimon never rewrites a data file, so sharing one is safe)."""
        self.write_bytes(target, self.read_bytes(source))


class LocalFileIO(FileIO):
    """Local (and mounted shared) filesystems; `file:` URIs are accepted."""

    def copy_file(self, source: str, target: str) -> None:
        """A hard link: no data is copied, and a later delete of either name keeps the other."""
        source, target = local_path(source), local_path(target)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            os.link(source, target)
        except OSError:  # another file system, or links not allowed: copy the bytes
            shutil.copyfile(source, target)

    def exists(self, path: str) -> bool:
        return os.path.exists(local_path(path))

    def read_bytes(self, path: str) -> bytes:
        with open(local_path(path), "rb") as f:
            return f.read()

    def mkdirs(self, path: str) -> None:
        os.makedirs(local_path(path), exist_ok=True)

    def _temp_beside(self, path: str) -> str:
        p = local_path(path)
        d, name = os.path.split(p)
        os.makedirs(d, exist_ok=True)
        return os.path.join(d, f".{name}.{uuid.uuid4().hex}.tmp")

    def write_bytes(self, path: str, data: bytes) -> None:
        tmp = self._temp_beside(path)
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, local_path(path))

    def write_exclusive(self, path: str, text: str) -> bool:
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
        tmp = self._temp_beside(path)
        with open(tmp, "wb") as f:
            f.write(text.encode("utf-8"))
        os.replace(tmp, local_path(path))

    def list_names(self, directory: str) -> list[str]:
        try:
            return [n for n in os.listdir(local_path(directory)) if not n.startswith(".")]
        except FileNotFoundError:
            return []

    def list_status(self, directory: str, recursive: bool = False) -> Iterator[FileStatus]:
        try:
            entries = list(os.scandir(local_path(directory)))
        except (FileNotFoundError, NotADirectoryError):
            return
        for e in entries:
            if e.is_symlink():
                continue
            path = f"{directory.rstrip('/')}/{e.name}"
            try:
                st = e.stat(follow_symlinks=False)
            except FileNotFoundError:  # deleted meanwhile
                continue
            if e.is_dir(follow_symlinks=False):
                if recursive:
                    yield from self.list_status(path, True)
                else:
                    yield FileStatus(path, 0, st.st_mtime_ns // 1_000_000, True)
            else:
                yield FileStatus(path, st.st_size, st.st_mtime_ns // 1_000_000, False)

    def delete(self, path: str) -> bool:
        try:
            os.unlink(local_path(path))
            return True
        except FileNotFoundError:
            return False

    def delete_empty_directory(self, path: str) -> bool:
        try:
            os.rmdir(local_path(path))
            return True
        except OSError:
            return False

    def size(self, path: str) -> int:
        return os.path.getsize(local_path(path))

    def mtime_ms(self, path: str) -> int:
        return os.stat(local_path(path)).st_mtime_ns // 1_000_000

    def open_input(self, path: str):
        return local_path(path)

    @contextmanager
    def output(self, path: str) -> Iterator["pa.NativeFile"]:
        # pyarrow streams into the file natively; a failed write leaves a file no snapshot names,
        # which orphan-file removal finds
        self.mkdirs(os.path.dirname(local_path(path)))
        with pa.OSFile(local_path(path), "wb") as sink:
            yield sink

    def __repr__(self) -> str:
        return "LocalFileIO()"
