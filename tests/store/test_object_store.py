"""Tables on an object store (issue 12, storage): the store's format through obstore against a real
S3-compatible server (moto, started by the session fixture), read back by pypaimon from the same
server. Atomic commit by conditional create; a store that ignores the condition is refused; bad
endpoints and credentials give clear errors without secrets."""

import http.client
import http.server
import multiprocessing
import threading
import uuid

import pyarrow as pa
import pytest

from tests.s3 import BUCKET
from dbt_paimon.store import FileStoreTable, PaimonError
from dbt_paimon.store.common import fileio
from dbt_paimon.store.common.fileio import FileIO
from dbt_paimon.store.common.object_store import ObjectStoreError, UnsafeCommitError
from tests.oracle import pypaimon_read

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string()),
                    pa.field("v", pa.string())])


def _rows(n, tag="a"):
    return pa.Table.from_pylist([{"id": i, "dt": f"d{i % 3}", "v": f"{tag}{i}"} for i in range(n)], SCHEMA)


def _write(table, rows):
    w = table.new_write()
    w.write(rows, buckets=pa.array([i % 2 for i in range(rows.num_rows)], pa.int32()))
    return w.commit()


def _listing(path):
    return sorted((st.path, st.size) for st in FileIO.get(path).list_status(path, recursive=True))


def test_write_read_evolve_tag_expire_and_orphans_on_s3(s3_warehouse):
    path = f"{s3_warehouse}/db.db/t"
    table = FileStoreTable.create(path, SCHEMA, primary_keys=["id"], partition_keys=["dt"], options={"bucket": "2"})
    _write(table, _rows(30))
    table.create_tag("first")
    _write(FileStoreTable.open(path), _rows(10, "b"))
    expected = [({**r, "v": f"b{r['id']}"} if r["id"] < 10 else r) for r in _rows(30).to_pylist()]
    assert sorted(FileStoreTable.open(path).to_arrow().to_pylist(), key=lambda r: r["id"]) == expected
    assert sorted(pypaimon_read(path).to_pylist(), key=lambda r: r["id"]) == expected
    assert FileStoreTable.open(path).to_arrow(tag="first").num_rows == 30

    table = FileStoreTable.open(path)
    table.alter_options({"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"})
    assert FileStoreTable.open(path).expire_snapshots().expired == [1]
    # a killed writer's data file: orphan removal finds it on the store (older_than 0: everything old)
    orphan = f"{path}/dt=d0/bucket-0/data-killed-0.parquet"
    FileIO.get(path).write_bytes(orphan, b"x" * 10)
    dry = FileStoreTable.open(path).remove_orphan_files(older_than=0, dry_run=True)
    assert dry.paths == [orphan]
    assert FileStoreTable.open(path).remove_orphan_files(older_than=0).paths == [orphan]
    assert not FileIO.get(path).exists(orphan)
    # the tag keeps snapshot 1's files through the expiration and the clean
    assert FileStoreTable.open(path).to_arrow(tag="first").num_rows == 30
    assert sorted(pypaimon_read(path).to_pylist(), key=lambda r: r["id"]) == expected


def _race(args):
    """One writer process: create snapshot-N only if absent."""
    options, path, who = args
    return FileIO.get(path, options).write_exclusive(path, who)


def test_two_writers_racing_for_one_snapshot_exactly_one_wins(s3_server, s3_warehouse):
    path = f"{s3_warehouse}/db.db/race/snapshot/snapshot-1"
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        won = pool.map(_race, [(s3_server.options, path, f"writer-{i}") for i in range(8)])
    assert sum(won) == 1
    winner = f"writer-{won.index(True)}"
    assert FileIO.get(path).read_text(path) == winner


class _StripConditions(http.server.BaseHTTPRequestHandler):
    """A proxy that forwards to the S3 server but drops If-None-Match: a store that ignores
    conditional writes, as some S3-compatible stores do."""

    upstream: tuple = ()

    def _forward(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() != "if-none-match"}  # Host is signed: kept
        conn = http.client.HTTPConnection(*self.upstream, timeout=30)
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    def log_message(self, *args):
        pass


def _moto_auth(endpoint: str, unauthenticated_requests: float) -> None:
    import urllib.request
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset-auth", method="POST",
                                                  data=str(unauthenticated_requests).encode(),
                                                  headers={"Content-Type": "text/plain"}), timeout=10)


@pytest.fixture
def unconditional_store(s3_server):
    # the proxy changes a signed header, so the server stops checking signatures meanwhile
    _moto_auth(s3_server.endpoint, float("inf"))
    host, port = s3_server.endpoint.split("//")[1].split(":")
    handler = type("Handler", (_StripConditions,), {"upstream": (host, int(port))})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield {**s3_server.options, "s3.endpoint": f"http://127.0.0.1:{server.server_address[1]}"}
    server.shutdown()
    _moto_auth(s3_server.endpoint, 0)


def test_a_store_without_conditional_writes_is_refused_unless_a_lock_is_chosen(unconditional_store, s3_warehouse):
    path = f"{s3_warehouse}/db.db/unsafe"
    io = FileIO.get(path, unconditional_store)
    with pytest.raises(UnsafeCommitError, match="does not honour conditional writes") as refused:
        FileStoreTable.create(path, SCHEMA, primary_keys=["id"], io=io)
    assert "commit.lock: local" in str(refused.value)
    assert not FileIO.get(path).list_names(path)  # no schema, no probe left behind
    locked = FileIO.get(path, {**unconditional_store, "commit.lock": "local"})
    table = FileStoreTable.create(path, SCHEMA, primary_keys=["id"], io=locked)
    assert _write(table, _rows(4)).snapshot.id == 1
    assert locked.write_exclusive(f"{path}/snapshot/snapshot-1", "again") is False  # the lock checks first


@pytest.mark.parametrize("change,error", [
    ({"s3.endpoint": "http://127.0.0.1:9"}, "cannot"),  # nothing listens on the discard port
    ({"s3.secret-key": "wrong-secret-value-1234"}, "cannot"),
    ({"s3.access-key": "nobody"}, "cannot"),
])
def test_bad_endpoint_or_credentials_are_clear_and_show_no_secret(s3_server, s3_warehouse, change, error):
    path = f"{s3_warehouse}/db.db/bad"
    options = {**s3_server.options, **change}
    with pytest.raises(PaimonError) as failed:
        FileStoreTable.create(path, SCHEMA, primary_keys=["id"], io=FileIO.get(path, options))
    message = str(failed.value)
    assert error in message and path.split("/db.db")[0] in message
    for secret in (s3_server.secret_key, options["s3.secret-key"]):
        assert secret not in message and secret not in repr(FileIO.get(path, options))
    assert not FileIO.get(path).list_names(path)


def test_a_missing_bucket_is_named(s3_server):
    path = f"s3://no-such-bucket-{uuid.uuid4().hex[:6]}/wh/db.db/t"
    with pytest.raises(ObjectStoreError, match="no-such-bucket"):
        FileStoreTable.create(path, SCHEMA, primary_keys=["id"], io=FileIO.get(path, s3_server.options))


def test_store_settings_are_never_stored_with_the_table(s3_server, s3_warehouse):
    path = f"{s3_warehouse}/db.db/t"
    FileStoreTable.create(path, SCHEMA, primary_keys=["id"])
    stored = FileIO.get(path).read_text(f"{path}/schema/schema-0")
    assert s3_server.secret_key not in stored and "s3." not in stored
    assert fileio.configured()["s3.secret-key"] == s3_server.secret_key  # configured, not stored


_CHILD = """
import sys
import pyarrow as pa
from dbt_paimon.store import FileStoreTable
path = sys.argv[1]
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
t = FileStoreTable.create(path, schema, primary_keys=["id"], options={"bucket": "1"})
w = t.new_write()
w.write(pa.Table.from_pylist([{"id": 1, "v": "x"}], schema), buckets=0)
w.commit()
print(FileStoreTable.open(path).to_arrow().num_rows)
"""


@pytest.mark.parametrize("chain", ["variables", "config-file"])
def test_the_standard_aws_chain_works_without_settings(s3_server, tmp_path, chain):
    """No storage options at all: AWS_* variables, or the AWS credentials file (through boto3)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ENDPOINT_URL=s3_server.endpoint, AWS_REGION="us-east-1")
    if chain == "variables":
        env.update(AWS_ACCESS_KEY_ID=s3_server.access_key, AWS_SECRET_ACCESS_KEY=s3_server.secret_key)
    else:
        credentials = tmp_path / "credentials"
        credentials.write_text(f"[default]\naws_access_key_id = {s3_server.access_key}\n"
                               f"aws_secret_access_key = {s3_server.secret_key}\n")
        env.update(AWS_SHARED_CREDENTIALS_FILE=str(credentials), AWS_CONFIG_FILE=str(tmp_path / "none"))
    path = f"s3://{BUCKET}/chain-{uuid.uuid4().hex[:8]}/wh/db.db/t"
    done = subprocess.run([sys.executable, "-c", _CHILD, path], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "1"
