"""Downstream first: each flow's Spark jobs run in the scheduler pool of its depth (runtime/scheduling.py),
and the tables hold what they hold under Spark's default scheduler."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from test_medallion import PIPELINE, event

from deltaflow.pipeline import Pipeline
from deltaflow.runtime.scheduling import flow_depths
from helpers import Project

EVENTS = [event("e1", "u1", "p1", "2025-05-01T10:05:00", 10.0),
          event("e2", "u2", "p1", "2025-05-01T10:20:00", 5.0),
          event("e2", "u2", "p1", "2025-05-01T10:20:00", 5.0),  # a duplicate, dropped by silver
          event("e3", "u1", "p2", "2025-05-01T11:10:00", 7.5)]


def stage_pools(spark: Any) -> dict[str, set[str]]:
    """Job group (a query's run id) -> the scheduler pools its jobs' stages ran in, from the status store.

    A skipped stage (its shuffle output there already) ran no task, and the store shows it in no pool.
    """
    sc = spark.sparkContext
    store = sc._jsc.sc().statusStore()
    mapper = sc._jvm.org.apache.spark.status.api.v1.JacksonMessageWriter().mapper()
    quantiles = sc._gateway.new_array(sc._jvm.double, 0)
    stages = json.loads(mapper.writeValueAsString(store.stageList(None, False, False, quantiles, None)))
    pool_of = {int(s["stageId"]): s["schedulingPool"] for s in stages if s["status"] != "SKIPPED"}
    pools: dict[str, set[str]] = {}
    for job in json.loads(mapper.writeValueAsString(store.jobsList(None))):
        group = job.get("jobGroup") or ""
        pools.setdefault(group, set()).update(pool_of[s] for s in job["stageIds"] if s in pool_of)
    return pools


def test_each_flow_runs_in_the_pool_of_its_depth(spark, make_project: Callable[..., Project]) -> None:
    project = make_project(PIPELINE)
    (project.root / "landing").mkdir()
    (project.root / "landing" / "batch-001.json").write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    run = Pipeline.load(project.spec_path, spark=spark).start("available_now")
    run.finish(threading.Event())

    assert flow_depths(run.resolver) == {"bronze": 0, "silver": 1, "gold": 2}
    pools = stage_pools(spark)
    for flow, depth in (("bronze", 0), ("silver", 1), ("gold", 2)):
        assert pools[str(run.queries[flow].runId)] == {f"deltaflow-depth-{depth}"}, flow
    assert sorted(r["id"] for r in project.rows("silver")) == ["e1", "e2", "e3"]
    gold = {(r["product"], r["orders"], r["unique_users"], r["revenue"]) for r in project.rows("gold")}
    assert gold == {("p1", 2, 2, 15.0), ("p2", 1, 1, 7.5)}
