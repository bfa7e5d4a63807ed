"""Several flows into one streaming table, and Delta source options reaching the source."""

from __future__ import annotations

import threading

from deltalake import DeltaTable

from deltaflow.pipeline import Pipeline
from deltaflow.runtime.run_plan import RunPlan
from deltaflow.runtime.runner import PipelineRun
from deltaflow.spec import load_spec

APPEND_FLOWS = """
import deltaflow as dp

dp.create_streaming_table("all_orders", schema="id STRING, channel STRING", comment="every channel")

@dp.append_flow(target="all_orders")
def web():
    return dp.read_files("web", schema="id STRING").selectExpr("id", "'web' AS channel")

@dp.append_flow(target="all_orders", name="shop")
def anything():
    return dp.read_files("shop", schema="id STRING").selectExpr("id", "'shop' AS channel")

@dp.table
def throttled():
    return spark.readStream.option("maxFilesPerTrigger", 1).table("all_orders")
"""


def run(spark, project, plan: RunPlan | None = None) -> PipelineRun:  # type: ignore[no-untyped-def]
    spec = load_spec(project.spec_path)
    pipeline = Pipeline(spec, spark=spark).start("available_now", plan=plan)
    pipeline.finish(threading.Event())
    return pipeline


def rows(project, table: str) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    table_rows = DeltaTable(project.table(table)).to_pyarrow_table().to_pylist()
    return sorted((r["id"], r["channel"]) for r in table_rows)


def test_append_flows_feed_one_table_each_from_its_own_checkpoint(spark, make_project) -> None:
    project = make_project(APPEND_FLOWS)
    project.drop("1.json", [{"id": i} for i in ["w1", "w2"]], folder="web")
    project.drop("1.json", [{"id": i} for i in ["s1"]], folder="shop")
    first = run(spark, project)
    project.drop("2.json", [{"id": i} for i in ["w3"]], folder="web")
    second = run(spark, project)

    expected = [("s1", "shop"), ("w1", "web"), ("w2", "web"), ("w3", "web")]
    assert rows(project, "all_orders") == expected
    assert DeltaTable(project.table("all_orders")).metadata().description == "every channel"
    for flow in ("web", "shop"):
        assert (project.checkpoint("all_orders", flow) / "offsets").is_dir()
    # maxFilesPerTrigger=1 reached Delta's source: one micro-batch per all_orders commit
    batches = [p for p in first.queries["throttled"].recentProgress if p.numInputRows]
    assert len(batches) == 2  # the web and shop commits of the first run
    assert [p.numInputRows for p in second.queries["throttled"].recentProgress if p.numInputRows] == [1]
    assert rows(project, "throttled") == expected

    # a full refresh rebuilds the table from both flows, and its reader from scratch
    run(spark, project, RunPlan(full_refresh=frozenset({"all_orders"})))
    assert rows(project, "all_orders") == expected
    assert rows(project, "throttled") == expected
    for flow in ("web", "shop"):
        assert (project.checkpoint("all_orders", flow, generation=1) / "offsets").is_dir()
