"""Runs steps of the integration project in this (fresh) process and writes what happened as JSON.

    python project_runner.py PROJECT_DIR OUT.json seed run:1 test:1 run:2 ... show docs

Used by test_dbt_project.py (as a child process, and in its own process for the later steps): a later
dbt invocation must work from a process that did not build the tables.
"""

import json
import sys
import time

from dbt.adapters.factory import reset_adapters
from dbt.cli.main import dbtRunner


class StepFailed(RuntimeError):
    pass


def invoke(project: str, args: list[str]):
    result = dbtRunner().invoke([*args, "--project-dir", project, "--profiles-dir", project])
    if not result.success:
        raise StepFailed(f"dbt {' '.join(args)} failed: {result.exception or 'see its log'}")
    return result.result


def main(project: str, out: str, steps: list[str]) -> None:
    try:
        _run(project, out, steps)
    finally:
        # dbt resets its adapters when an invocation starts, not when it ends: the last one's adapter
        # (this project's warehouse) would be the one the next dbt-tests-adapter project in this
        # process gets (dbt's register_adapter keeps a registered one)
        reset_adapters()


def _run(project: str, out: str, steps: list[str]) -> None:
    report: dict = {"runs": [], "tests": [], "show": None, "catalog": None, "seconds": {}}
    for step in steps:
        started = time.time()
        what, _, batch = step.partition(":")
        variables = ["--vars", f"{{batch: {batch}}}"] if batch else []
        if what == "seed":
            invoke(project, ["seed"])
        elif what == "run":
            for r in invoke(project, ["run", *variables]):
                report["runs"].append({"batch": int(batch), "model": r.node.name, "status": r.status.value,
                                       "message": r.message, "adapter_response": r.adapter_response})
        elif what == "test":
            results = [r for r in invoke(project, ["test", *variables]) if r.node.resource_type == "test"]
            report["tests"].append({"batch": int(batch), "passed": sum(r.status == "pass" for r in results),
                                    "total": len(results)})
        elif what == "show":
            shown = invoke(project, ["show", "--inline",
                                     "select customer_id, country from {{ ref('customers') }} order by customer_id",
                                     "--limit", "100"])
            report["show"] = [list(map(str, row)) for row in shown.results[0].agate_table.rows]
        elif what == "docs":
            catalog = invoke(project, ["docs", "generate"])
            report["catalog"] = {uid.split(".")[-1]: {"type": n.metadata.type, "comment": n.metadata.comment,
                                                      "columns": {c: [col.type, col.comment]
                                                                  for c, col in n.columns.items()}}
                                 for uid, n in catalog.nodes.items()}
        else:
            raise StepFailed(f"unknown step {step!r}")
        report["seconds"][step] = round(time.time() - started, 1)
    with open(out, "w") as f:
        json.dump(report, f, indent=1, default=str)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
