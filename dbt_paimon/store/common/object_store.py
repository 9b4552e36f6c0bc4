"""FileIO on object stores (S3 and S3-compatible stores, GCS, Azure) through obstore.

obstore is imported where it is used, not with this module: Spark executors working on a local
warehouse need not have it (engine/runtime/deploy.py checks for it only for object-store tables).

Why obstore (Rust's object_store, the I/O layer of delta-rs): one small wheel with no Python
dependencies that speaks S3, GCS and Azure, with the create-only PUT (`PutMode::Create`) a Paimon
commit needs on a store without rename; pyarrow's filesystems have no conditional write, boto3 is
S3-only and heavier, fsspec/s3fs add a stack of async dependencies for the same calls.

Atomic commit: `snapshot-N`, `schema-N` and tag files are created with one conditional PUT
(`If-None-Match: *` on S3 and Azure, generation match 0 on GCS): of two writers racing for the same
snapshot exactly one gets it. Some S3-compatible stores ignore the condition, so before its first
create under a root a process checks that the store refuses a second create of the same probe
object; a store that does not is refused with a clear error, unless the user opts into
`commit.lock = local`, an exclusive lock on this machine (safe only when every writer of the
warehouse runs on this host).

Settings use Paimon's option names (s3.endpoint, s3.access-key, s3.secret-key, s3.region,
s3.path.style.access; pypaimon's fs.s3.* spellings too); what is not given comes from the store's
standard environment (AWS_* variables; with boto3 installed, also the AWS config files' chain).
Secrets never appear in a repr or an error message.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
import threading
import uuid
from contextlib import contextmanager
from typing import Iterator, Mapping

import pyarrow as pa

from .errors import PaimonError
from .fileio import FileIO, FileStatus, register_object_store_io

_S3_KEYS = {  # Paimon's (and pypaimon's) option name -> object_store's S3 config key
    "s3.endpoint": "endpoint", "fs.s3.endpoint": "endpoint",
    "s3.access-key": "access_key_id", "fs.s3.accessKeyId": "access_key_id",
    "s3.secret-key": "secret_access_key", "fs.s3.accessKeySecret": "secret_access_key",
    "s3.session-token": "token", "fs.s3.securityToken": "token",
    "s3.region": "region", "fs.s3.region": "region",
}
_SECRET_KEYS = {"s3.secret-key", "fs.s3.accessKeySecret", "s3.session-token", "fs.s3.securityToken",
                "s3.access-key", "fs.s3.accessKeyId", "gcs.service-account-key", "azure.account-key"}
COMMIT_LOCK = "commit.lock"  # "none" (default: the store's conditional create) | "local"


class ObjectStoreError(PaimonError):
    """An object store refused or failed a request (the message names the path, never a secret)."""


class UnsafeCommitError(ObjectStoreError):
    """The store cannot create a file only if absent, and no lock was chosen."""


_stores: dict[tuple, object] = {}
_safe_roots: set[tuple] = set()
_lock = threading.Lock()


def _already_exists(e: ObjectStoreError) -> bool:
    """A create-only PUT refused because the object exists (S3/Azure 412, GCS precondition)."""
    return "AlreadyExists" in str(e) or "Precondition" in str(e)


def split_uri(path: str) -> tuple[str, str, str]:
    """(scheme, bucket, key) of `s3://bucket/key`; Azure's `abfs://container@account.../key` gives
    the container as bucket (the account comes from the host)."""
    scheme, rest = path.split("://", 1)
    bucket, _, key = rest.partition("/")
    return scheme.lower(), bucket, "/".join(p for p in key.split("/") if p)


class ObjectStoreFileIO(FileIO):
    def __init__(self, settings: Mapping[str, str]):
        self.settings = dict(settings)

    # ---- pickling: settings travel to the executors, the client is made again there ------------
    def __getstate__(self):
        return {"settings": self.settings}

    def __setstate__(self, state):
        self.settings = state["settings"]

    def __repr__(self) -> str:
        shown = {k: ("***" if k in _SECRET_KEYS else v) for k, v in sorted(self.settings.items())}
        return f"ObjectStoreFileIO({shown})"

    @property
    def is_object_store(self) -> bool:
        return True

    # ---- the client ----------------------------------------------------------------------------
    def _store(self, path: str):
        scheme, bucket, _ = split_uri(path)
        cache_key = (scheme, bucket, tuple(sorted(self.settings.items())))
        store = _stores.get(cache_key)
        if store is None:
            with _lock:
                store = _stores.get(cache_key) or self._make_store(scheme, bucket)
                _stores[cache_key] = store
        return store

    def _make_store(self, scheme: str, bucket: str):
        from obstore.store import AzureStore, GCSStore, S3Store

        if scheme in ("s3", "s3a", "s3n"):
            config = {_S3_KEYS[k]: v for k, v in self.settings.items() if k in _S3_KEYS}
            path_style = self.settings.get("s3.path.style.access", self.settings.get("fs.s3.pathStyleAccess"))
            if path_style is not None:
                config["virtual_hosted_style_request"] = str(path_style).lower() != "true"
            endpoint = config.get("endpoint") or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get(
                "AWS_ENDPOINT_URL")
            client = {"allow_http": True} if endpoint and endpoint.startswith("http://") else {}
            provider = None
            if "access_key_id" not in config and not os.environ.get("AWS_ACCESS_KEY_ID"):
                provider = _boto3_provider()  # the AWS config files' chain, when boto3 is there
            return S3Store(bucket, config=config or None, client_options=client or None,
                           credential_provider=provider)
        if scheme in ("gs", "gcs"):
            config = {}
            if "gcs.service-account-key" in self.settings:
                config["service_account_key"] = self.settings["gcs.service-account-key"]
            return GCSStore(bucket, config=config or None)
        if scheme in ("abfs", "abfss", "az", "azure"):
            container, _, host = bucket.partition("@")
            config = {}
            if host:
                config["account_name"] = host.split(".", 1)[0]
            if "azure.account-key" in self.settings:
                config["account_key"] = self.settings["azure.account-key"]
            return AzureStore(container, config=config or None)
        raise ObjectStoreError(f"unsupported object store scheme {scheme}://")

    def _redact(self, text: str) -> str:
        for k, v in self.settings.items():
            if k in _SECRET_KEYS and v:
                text = text.replace(v, "***")
        return text

    def _call(self, what: str, path: str, fn):
        """Run one request; errors become ObjectStoreErrors naming the path (FileNotFoundError stays)."""
        try:
            return fn(self._store(path), split_uri(path)[2])
        except FileNotFoundError:
            raise
        except PaimonError:
            raise
        except Exception as e:  # noqa: BLE001 - obstore's errors carry the store's answer
            if type(e).__name__ == "NotFoundError":
                raise FileNotFoundError(path) from None
            message = self._redact(str(e)).strip().splitlines()
            raise ObjectStoreError(f"object store: cannot {what} {path}: {type(e).__name__}: "
                                   f"{' '.join(message)[:600]}") from None

    # ---- FileIO --------------------------------------------------------------------------------
    def exists(self, path: str) -> bool:
        import obstore as obs
        try:
            self._call("read", path, lambda s, k: obs.head(s, k))
            return True
        except FileNotFoundError:
            return False

    def read_bytes(self, path: str) -> bytes:
        import obstore as obs
        return bytes(self._call("read", path, lambda s, k: obs.get(s, k).bytes()))

    def mkdirs(self, path: str) -> None:
        pass  # an object store has no directories

    def write_bytes(self, path: str, data: bytes) -> None:
        import obstore as obs
        self._call("write", path, lambda s, k: obs.put(s, k, data))

    def overwrite_text(self, path: str, text: str) -> None:
        self.write_bytes(path, text.encode("utf-8"))

    def copy_file(self, source: str, target: str) -> None:
        """A server-side copy: the bytes never pass through this process."""
        import obstore as obs
        if split_uri(source)[:2] != split_uri(target)[:2]:  # another bucket: through this process
            super().copy_file(source, target)
            return
        self._call("copy", source, lambda s, k: obs.copy(s, k, split_uri(target)[2]))

    def write_exclusive(self, path: str, text: str) -> bool:
        import obstore as obs
        data = text.encode("utf-8")
        if self.settings.get(COMMIT_LOCK, "none") == "local":
            with _local_lock(path):
                if self.exists(path):
                    return False
                self.write_bytes(path, data)
                return True
        self.check_commit_safety(path.rsplit("/", 1)[0])
        try:
            self._call("create", path, lambda s, k: obs.put(s, k, data, mode="create"))
            return True
        except ObjectStoreError as e:
            if _already_exists(e):
                return False
            raise

    def check_commit_safety(self, table_path: str) -> None:
        """Once per store root and process: the store must refuse a second create of an object."""
        import obstore as obs
        scheme, bucket, _ = split_uri(table_path)
        root = (scheme, bucket, tuple(sorted(self.settings.items())))
        if root in _safe_roots or self.settings.get(COMMIT_LOCK, "none") == "local":
            return
        probe = f"{table_path.rstrip('/')}/.dbt-paimon-commit-probe-{uuid.uuid4().hex}"
        self._call("create", probe, lambda s, k: obs.put(s, k, b"1", mode="create"))
        try:
            try:
                self._call("create", probe, lambda s, k: obs.put(s, k, b"2", mode="create"))
                refused = False
            except ObjectStoreError as e:
                refused = _already_exists(e)
                if not refused:
                    raise
        finally:
            self.delete(probe)
        if not refused:
            raise UnsafeCommitError(
                f"the object store of {scheme}://{bucket} does not honour conditional writes (a create-only PUT "
                f"of an existing object succeeded), so two writers could both commit the same snapshot; "
                f"nothing was committed. Use a store with conditional writes (AWS S3, GCS, Azure, MinIO, ...), "
                f"or set {COMMIT_LOCK}: local if every writer of this warehouse runs on this machine")
        _safe_roots.add(root)

    def list_names(self, directory: str) -> list[str]:
        import obstore as obs
        prefix = split_uri(directory)[2]
        listed = self._call("list", directory,
                            lambda s, k: obs.list_with_delimiter(s, prefix + "/" if prefix else None))
        names = [p.rstrip("/").rsplit("/", 1)[-1] for p in listed["common_prefixes"]]
        names += [o["path"].rsplit("/", 1)[-1] for o in listed["objects"]]
        return [n for n in names if not n.startswith(".")]

    def list_status(self, directory: str, recursive: bool = False) -> Iterator[FileStatus]:
        import obstore as obs
        base = directory.rstrip("/")
        prefix = split_uri(directory)[2]
        key_prefix = prefix + "/" if prefix else ""
        root = base[: len(base) - len(prefix)].rstrip("/") if prefix else base

        def full(key: str) -> str:
            return f"{root}/{key}"

        if recursive:
            chunks = self._call("list", directory, lambda s, k: obs.list(s, key_prefix or None).collect())
            for o in chunks:
                yield FileStatus(full(o["path"]), o["size"], int(o["last_modified"].timestamp() * 1000), False)
            return
        listed = self._call("list", directory, lambda s, k: obs.list_with_delimiter(s, key_prefix or None))
        for p in listed["common_prefixes"]:
            yield FileStatus(full(p.rstrip("/")), 0, 0, True)
        for o in listed["objects"]:
            yield FileStatus(full(o["path"]), o["size"], int(o["last_modified"].timestamp() * 1000), False)

    def delete(self, path: str) -> bool:
        import obstore as obs
        self._call("delete", path, lambda s, k: obs.delete(s, k))
        return True  # S3's delete is idempotent: it does not say whether the object was there

    def delete_empty_directory(self, path: str) -> bool:
        return False

    def size(self, path: str) -> int:
        import obstore as obs
        return int(self._call("read", path, lambda s, k: obs.head(s, k))["size"])

    def mtime_ms(self, path: str) -> int:
        import obstore as obs
        return int(self._call("read", path, lambda s, k: obs.head(s, k))["last_modified"].timestamp() * 1000)

    def open_input(self, path: str):
        import obstore as obs
        # One GET of the whole object: a merge-on-read reads every file it opens anyway
        data = self._call("read", path, lambda s, k: obs.get(s, k).bytes())
        # Into memory Arrow owns (one copy): the Parquet reader's pool threads may drop the last
        # reference after the interpreter began to exit, and a buffer owned by a Python object
        # then takes the GIL from a dying thread: the process aborted ("terminate called without
        # an active exception") after its work was done, 4-7 runs in 30 that read from S3.
        owned = pa.allocate_buffer(len(data))
        memoryview(owned).cast("B")[:] = memoryview(data).cast("B")
        return pa.BufferReader(owned)

    @contextmanager
    def output(self, path: str) -> Iterator[pa.NativeFile]:
        import obstore as obs
        sink = pa.BufferOutputStream()
        yield sink
        data = sink.getvalue()
        self._call("write", path, lambda s, k: obs.put(s, k, data.to_pybytes()))


register_object_store_io(ObjectStoreFileIO)


def _boto3_provider():
    try:
        import boto3  # noqa: F401
        from obstore.auth.boto3 import Boto3CredentialProvider
    except ImportError:
        return None
    try:
        provider = Boto3CredentialProvider()
        return provider if provider.credentials is not None else None
    except Exception:  # noqa: BLE001 - no profile configured: object_store's own chain applies
        return None


@contextmanager
def _local_lock(path: str) -> Iterator[None]:
    """commit.lock = local: an exclusive lock file per target object on this machine."""
    folder = os.path.join(tempfile.gettempdir(), "dbt-paimon-commit-locks")
    os.makedirs(folder, exist_ok=True)
    name = hashlib.sha256(path.encode()).hexdigest()[:32]
    with open(os.path.join(folder, name), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def copy_tree(io: ObjectStoreFileIO, source: str, target: str) -> int:
    """Copy every object under `source` to the same name under `target`, server-side."""
    import obstore as obs
    copied = 0
    for status in list(io.list_status(source, recursive=True)):
        rel = status.path[len(source.rstrip("/")) + 1:]
        dest = f"{target.rstrip('/')}/{rel}"
        io._call("copy", status.path, lambda s, k, dest=dest: obs.copy(s, k, split_uri(dest)[2]))
        copied += 1
    return copied
