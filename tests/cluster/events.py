"""Spark's own record of an application (its event log): which executors ran which tasks.

The cluster tests read it rather than trust the code under test to say where it ran.
"""

from __future__ import annotations

import json
import os
from collections import Counter


def _events(event_dir: str, app_id: str):
    """The application's events: one file <app_id>, or rolling files eventlog_v2_<app_id>/events_N_<app_id>."""
    for base, _, names in os.walk(event_dir):
        for name in sorted(names):
            if app_id in name and (name == app_id or name.startswith("events_")):
                with open(os.path.join(base, name)) as f:
                    for line in f:
                        yield json.loads(line)


def python_tasks(event_dir: str, app_id: str, job_group: str | None = None) -> dict:
    """Successful tasks of the stages that ran our Arrow tasks (MapInArrow: the engine's jobs),
    counted per executor id; and the descriptions of the application's jobs. job_group: only the
    stages of the jobs of that group (SparkContext.setJobGroup)."""
    arrow_stages, per_executor, descriptions, grouped = set(), Counter(), [], set()
    events = list(_events(event_dir, app_id))
    for e in events:
        if e["Event"] == "SparkListenerStageSubmitted":
            scopes = [json.loads(r["Scope"])["name"] for r in e["Stage Info"]["RDD Info"] if r.get("Scope")]
            if "MapInArrow" in scopes:
                arrow_stages.add(e["Stage Info"]["Stage ID"])
        elif e["Event"] == "SparkListenerJobStart":
            properties = e.get("Properties", {})
            descriptions.append(properties.get("spark.job.description"))
            if job_group is not None and properties.get("spark.jobGroup.id") == job_group:
                grouped.update(e["Stage IDs"])
    if job_group is not None:
        arrow_stages &= grouped
    for e in events:
        if (e["Event"] == "SparkListenerTaskEnd" and e["Stage ID"] in arrow_stages
                and e["Task End Reason"]["Reason"] == "Success"):
            per_executor[e["Task Info"]["Executor ID"]] += 1
    return {"arrow_stages": len(arrow_stages), "tasks_per_executor": dict(per_executor),
            "job_descriptions": descriptions, "events": len(events)}


def group_tasks(event_dir: str, app_id: str, job_group: str) -> dict:
    """Successful tasks of every stage of the jobs of `job_group`, counted per executor id."""
    events = list(_events(event_dir, app_id))
    stages = set()
    for e in events:
        if e["Event"] == "SparkListenerJobStart" and e.get("Properties", {}).get("spark.jobGroup.id") == job_group:
            stages.update(e["Stage IDs"])
    per_executor = Counter(e["Task Info"]["Executor ID"] for e in events
                           if e["Event"] == "SparkListenerTaskEnd" and e["Stage ID"] in stages
                           and e["Task End Reason"]["Reason"] == "Success")
    return dict(per_executor)
