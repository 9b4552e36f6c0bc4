"""Helper processes that answer JSON lines (Paimon's Spark runner, the Java writer): one request, one answer."""

from __future__ import annotations

import json
import subprocess


def ask(proc: subprocess.Popen, request: dict, log: str, who: str) -> dict:
    """Write `request` as one JSON line to proc's stdin and return its one-line JSON answer. When the
    process has exited instead, RuntimeError with the tail of its log (its stderr) names what happened."""
    proc.stdin.write(json.dumps(request) + "\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    if not line:
        with open(log) as f:
            raise RuntimeError(f"{who} exited ({proc.wait()}):\n{f.read()[-3000:]}")
    return json.loads(line)
