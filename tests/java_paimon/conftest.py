import shutil

import pytest

from .fetch_jar import fetch_jar
from .javapaimon import JavaPaimon


@pytest.fixture(scope="session")
def java(tmp_path_factory) -> JavaPaimon:
    """Java Paimon 0.9 as an oracle. Missing prerequisites fail the tests, never skip them: a silently
    skipped oracle would let a format regression pass."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            pytest.fail(f"the Java Paimon oracle needs `{tool}` (Java 17) on PATH", pytrace=False)
    try:
        jar, problem = fetch_jar(), None
    except Exception as e:
        jar, problem = None, str(e)
    if problem:
        pytest.fail(f"cannot fetch Paimon 0.9's jar for the Java oracle (needs network once; "
                    f"`python tests/java_paimon/fetch_jar.py` fetches it): {problem}", pytrace=False)
    return JavaPaimon(jar, str(tmp_path_factory.mktemp("java-paimon")))
