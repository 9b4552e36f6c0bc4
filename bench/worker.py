"""One phase of one system, in a fresh process (run.py starts it), so that each system's peak memory
is its own and no system inherits another's caches, threads or JVM.

    python bench/worker.py setup  SYSTEM CASE_DIR WORK_DIR
    python bench/worker.py upsert SYSTEM CASE_DIR WORK_DIR

CASE_DIR holds base.parquet, batch.parquet and case.json (the case and the model checksums).
The last stdout line is `RESULT <json>`; anything else a library prints is ignored.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers  # noqa: E402   (model, which imports pandas, only after the peak memory is read)


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            kids = []
        out += kids
        todo += kids
    return out


def hwm_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return 0


def peak_rss_mb() -> float:
    """RSS high-water mark (VmHWM) of this process plus that of every live descendant: Spark's JVM
    and its Python workers are child processes whose memory belongs to the engine's figure.
    Not ru_maxrss: on Linux it survives fork+exec, so a worker would inherit run.py's own peak (the
    generated data); VmHWM belongs to the address space, which exec makes new. Summing the
    descendants' high-water marks can only overstate the true simultaneous peak."""
    return sum(hwm_kib(p) for p in [os.getpid()] + descendants(os.getpid())) / 1024


def main() -> None:
    phase, system, case_dir, work_dir = sys.argv[1:5]
    with open(os.path.join(case_dir, "case.json")) as f:
        case = json.load(f)
    peer = peers.get(system)
    out: dict = {"versions": peer.versions()}
    os.makedirs(work_dir, exist_ok=True)

    t0 = time.perf_counter()
    peer.start(work_dir)
    out["startup_seconds"] = time.perf_counter() - t0
    try:
        if phase == "setup":
            t0 = time.perf_counter()
            peer.setup(work_dir, os.path.join(case_dir, "base.parquet"))
            out["setup_seconds"] = time.perf_counter() - t0
        elif phase == "upsert":
            batch = peer.load_batch(os.path.join(case_dir, "batch.parquet"))
            t0 = time.perf_counter()
            out["info"] = peer.upsert(work_dir, batch) or {}
            out["seconds"] = time.perf_counter() - t0
            out["peak_rss_mb"] = peak_rss_mb()          # before the read-back, which is not the upsert's
            del batch

            import model
            want, got, problems = case["expected"][peer.model], None, []
            t0 = time.perf_counter()
            try:   # a table its own reader cannot read is an invalid result, not a lost measurement
                got = model.checksum(peer.read_back(work_dir))
            except Exception as e:  # noqa: BLE001 - a peer that cannot read back its table is an invalid result, reported
                problems.append(f"read-back failed: {type(e).__name__}: {str(e)[:300]}")
            out["read_seconds"] = time.perf_counter() - t0
            if got is not None and got != want:
                problems.append(f"read-back {got['rows']:,} rows hash {got['hash']}, model `{peer.model}` "
                                f"{want['rows']:,} rows hash {want['hash']}")
            problems += [p for p in [peer.check(out["info"], case)] if p]
            out.update(model=peer.model, got=got, expected=want, valid=not problems,
                       problem="; ".join(problems) or None)
            if peer.second_reader:
                out["cross_read"] = {"reader": peer.second_reader}
                try:
                    other = model.checksum(peer.second_opinion(work_dir))
                    out["cross_read"].update(agrees=other == want, got=other)
                except Exception as e:  # noqa: BLE001 - another reader failing is a finding to report, not a crash
                    out["cross_read"].update(agrees=False, error=f"{type(e).__name__}: {str(e)[:300]}")
        else:
            raise SystemExit(f"unknown phase {phase}")
    finally:
        peer.stop()
    if phase == "upsert":
        try:
            out["profile"] = peer.profile()
        except Exception as e:  # noqa: BLE001 - a profile is a help for reading the figure, never a reason to lose it
            out["profile"] = {"error": f"{type(e).__name__}: {e}"}
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
