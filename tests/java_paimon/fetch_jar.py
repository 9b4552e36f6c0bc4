"""Fetch the reference Paimon's jars through Maven: `python tests/java_paimon/fetch_jar.py`.

`mvn dependency:get` of each pinned artifact (`reference.py`) into the git-ignored `.work/java-paimon/`;
Maven checks its own checksums, and the jar's sha256 is checked against the pin. Nothing binary is
committed. Idempotent: a jar already there with the pinned digest is kept, and no Maven runs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

if __package__ in (None, ""):  # run as a script by run.sh
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from tests.java_paimon.reference import PAIMON, PAIMON_S3, Artifact
else:
    from .reference import PAIMON, PAIMON_S3, Artifact

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.path.join(ROOT, ".work", "java-paimon")


def shared_jars() -> list[str]:
    """Where jars Maven Central here does not serve wait, built from their release's source
    (reference.py says which): `shared/jars/` beside this checkout, or beside the checkout it was
    cloned from (a clean clone made elsewhere for a CI run)."""
    dirs = [os.path.join(os.path.dirname(ROOT), "shared", "jars")]
    try:
        origin = subprocess.run(["git", "config", "--get", "remote.origin.url"], cwd=ROOT, capture_output=True,
                                text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        origin = ""
    if origin and os.path.isdir(origin):
        dirs.append(os.path.join(os.path.dirname(os.path.abspath(origin.rstrip("/"))), "shared", "jars"))
    return dirs


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_jar(artifact: Artifact = PAIMON, shared: bool = False) -> str:
    """The path of the artifact's jar under .work/java-paimon/, fetched with Maven when missing; when
    Maven cannot and `shared` and one of `shared_jars()` holds the jar, that file, checked against the
    same pin and copied into the cache (so Maven is asked once). Raises RuntimeError naming the cause when it cannot
    (no `mvn`, not served, a different jar)."""
    jar = os.path.join(CACHE, artifact.jar)
    if os.path.exists(jar) and sha256(jar) == artifact.sha256:
        return jar
    try:
        return _maven(artifact, jar)
    except RuntimeError as refused:
        fallback = shared_jars() if shared else []
        local = next((f"{d}/{artifact.jar}" for d in fallback if os.path.exists(f"{d}/{artifact.jar}")), None)
        if local is None:
            raise RuntimeError(f"{refused}\n... and no {artifact.jar} in {' or '.join(fallback) or 'a fallback'}") \
                from refused
        if sha256(local) != artifact.sha256:
            raise RuntimeError(f"{local} has sha256 {sha256(local)}, pinned {artifact.sha256}") from refused
        os.makedirs(CACHE, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=CACHE) as tmp:  # a copy of its own: callers run side by side
            shutil.copyfile(local, os.path.join(tmp, artifact.jar))
            os.replace(os.path.join(tmp, artifact.jar), jar)
        return jar


def _maven(artifact: Artifact, jar: str) -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError(f"fetching {artifact.coordinates} needs Maven (`mvn`) on PATH")
    os.makedirs(CACHE, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        part = os.path.join(tmp, artifact.jar)
        # `get` of the jar alone, without its POM's parents: Maven Central serves some Paimon jars
        # (paimon-flink-2.0 2.0.0) without the parent POMs `copy` must read first. Plugin 2.8 is
        # Maven 3.8's own default and still writes the jar where `dest` says.
        cmd = [mvn, "-q", "-B", "org.apache.maven.plugins:maven-dependency-plugin:2.8:get",
               f"-Dartifact={artifact.coordinates}", "-Dtransitive=false", f"-Ddest={part}"]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        if done.returncode != 0 or not os.path.exists(part):
            raise RuntimeError(f"`{' '.join(cmd[1:])}` failed (exit {done.returncode}):\n"
                               f"{(done.stdout + done.stderr)[-2000:]}")
        if sha256(part) != artifact.sha256:
            raise RuntimeError(f"{artifact.coordinates} has sha256 {sha256(part)}, pinned {artifact.sha256}")
        os.replace(part, jar)  # atomic: a concurrent run sees no jar or the whole jar
    return jar


def oracle_jars() -> list[str]:
    """The Java oracle's jars: Paimon's, then its S3 file system's."""
    return [fetch_jar(PAIMON), fetch_jar(PAIMON_S3)]


if __name__ == "__main__":
    print(*oracle_jars())
