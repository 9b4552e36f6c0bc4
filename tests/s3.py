"""A local S3-compatible server for tests: moto's standalone server, a real HTTP server on
127.0.0.1 that enforces conditional writes (`If-None-Match: *`) and, once set up, signatures
(IAM), started as a subprocess. The session fixture in the root conftest.py uses it."""

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

BUCKET = "lake"


@dataclass
class S3Server:
    endpoint: str
    access_key: str = ""
    secret_key: str = ""  # made by the server: tests look for it in logs and errors

    @property
    def options(self) -> dict:
        """Store settings by Paimon's option names."""
        return {"s3.endpoint": self.endpoint, "s3.access-key": self.access_key, "s3.secret-key": self.secret_key,
                "s3.region": "us-east-1", "s3.path.style.access": "true"}

    def client(self):
        import boto3
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, region_name="us-east-1")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# moto checks credentials (IAM) once this many requests have passed: the fixture's first four make
# the user, its key and its policy; every later request must be signed with that key
_UNAUTHENTICATED_SETUP_ACTIONS = 4


def start_moto(port: int, log_path: str) -> subprocess.Popen:
    log = open(log_path, "wb")
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(_UNAUTHENTICATED_SETUP_ACTIONS)}
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"moto's S3 server exited; see {log_path}") from None
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"moto's S3 server did not answer on port {port} within 30 s; see {log_path}")


def make_user(endpoint: str) -> S3Server:
    """An IAM user allowed everything, and its access key (the server's first four requests)."""
    import json

    import boto3
    iam = boto3.client("iam", endpoint_url=endpoint, aws_access_key_id="setup", aws_secret_access_key="setup",
                       region_name="us-east-1")
    iam.create_user(UserName="dbt-paimon")
    key = iam.create_access_key(UserName="dbt-paimon")["AccessKey"]
    policy = iam.create_policy(PolicyName="everything", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
    iam.attach_user_policy(UserName="dbt-paimon", PolicyArn=policy["Policy"]["Arn"])
    return S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
