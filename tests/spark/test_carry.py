"""Carried flows (deltaflow.sinks.carry): silver written from bronze's micro-batches, one query for both.

Checked against Delta as written (read back with deltalake): each table exactly its rows, each commit
stamped by its own flow; two flows in the event log and in status; a carried flow that stops qualifying
leaves its carrier, is rebuilt, and goes on alone with nothing lost or twice; a pipeline whose flows
already ran apart stays apart.
"""

from __future__ import annotations

import threading

import pytest

from deltaflow.errors import ConfigError
from deltaflow.pipeline import Pipeline
from deltaflow.render import text
from deltaflow.sinks.carry import carried_flows
from helpers import Project

DEFS = """
import deltaflow as dp
from pyspark.sql import functions as F

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING, user STRING, ts TIMESTAMP, amount DOUBLE")

@dp.table
def silver():
    return ({read}
            .where(F.col("amount") > 0)
            .withWatermark("ts", "1 hour")
            .dropDuplicatesWithinWatermark(["id"])
            .drop("_corrupt_record"))
"""
PLAIN = DEFS.format(read='spark.readStream.table("bronze")')
WITH_OPTION = DEFS.format(read='spark.readStream.option("maxFilesPerTrigger", 100).table("bronze")')


def events(tag: str, count: int, duplicate: bool = True) -> list[dict[str, object]]:
    rows = [{"id": f"{tag}{i}", "user": f"u{i % 3}", "ts": f"2026-11-26T10:{i:02d}:00Z",
             "amount": float(i % 4)} for i in range(count)]
    return rows + rows[:2] if duplicate else rows  # a producer's retry: two events twice


def expected_silver(all_events: list[dict[str, object]]) -> list[str]:
    return sorted({str(e["id"]) for e in all_events if float(e["amount"]) > 0})  # type: ignore[arg-type]


def run(spark, project: Project) -> Pipeline:  # type: ignore[no-untyped-def]
    pipeline = project.pipeline(spark)
    pipeline.start("available_now").finish(threading.Event())
    return pipeline


def test_silver_is_written_from_bronzes_batches_each_table_exactly_once(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(PLAIN)
    first = events("a", 12)
    project.drop("1.json", first)
    pipeline = project.pipeline(spark)
    graph = text(pipeline.dry_run())
    assert "written from bronze's micro-batches (one query for both" in graph
    assert "one foreachBatch that also writes silver's rows" in graph

    started = pipeline.start("available_now")
    started.finish(threading.Event())
    assert started.queries["silver"] is started.queries["bronze"]
    layout = project.layout
    assert carried_flows(layout, layout.checkpoint("bronze", "bronze")) == ["silver"]
    assert layout.position("silver", "silver") == layout.checkpoint("bronze", "bronze")
    assert len(project.rows("bronze")) == len(first)
    assert sorted(r["id"] for r in project.rows("silver")) == expected_silver(first)

    second = events("b", 8)
    project.drop("2.json", second)
    pipeline = run(spark, project)
    assert len(project.rows("bronze")) == len(first) + len(second)
    silver = [r["id"] for r in project.rows("silver")]
    assert sorted(silver) == expected_silver(first + second) and len(silver) == len(set(silver))

    # each table's commits carry their own flow's stamp; both flows are in the event log and in status
    writers = {v.flow for v in pipeline.history("silver") if v.operation != "CREATE TABLE"}
    assert writers == {"silver"}
    status = {s.flow: s for s in pipeline.status()}
    assert status["silver"].last_batch == status["bronze"].last_batch is not None
    assert status["silver"].rows_total == status["bronze"].rows_total == len(first) + len(second)

    with pytest.raises(ConfigError, match=r"written inside flow 'bronze''s query.*rewind 'bronze' instead"):
        pipeline.rewind("silver", version=1)


def test_a_carried_flow_that_stops_qualifying_is_rebuilt_and_runs_alone(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(PLAIN)
    first = events("a", 10)
    project.drop("1.json", first)
    run(spark, project)
    layout = project.layout
    assert layout.position("silver", "silver").flow == "bronze"

    # silver now reads bronze with an option: it can no longer be carried
    (project.root / "transformations" / "defs.py").write_text(WITH_OPTION)
    second = events("b", 6)
    project.drop("2.json", second)
    messages: list[str] = []
    pipeline = project.pipeline(spark)
    pipeline.start("available_now", on_message=messages.append).finish(threading.Event())
    assert any("bronze: carries silver no more" in m for m in messages), messages
    assert [layout.current_generation(t, t) for t in ("bronze", "silver")] == [1, 1]
    assert layout.position("silver", "silver").flow == "silver"
    assert carried_flows(layout, layout.checkpoint("bronze", "bronze")) == []
    assert len(project.rows("bronze")) == len(first) + len(second)  # bronze went on where it stood
    silver = [r["id"] for r in project.rows("silver")]
    assert sorted(silver) == expected_silver(first + second) and len(silver) == len(set(silver))

    third = events("c", 5)
    project.drop("3.json", third)
    run(spark, project)
    assert len(project.rows("bronze")) == len(first) + len(second) + len(third)
    silver = [r["id"] for r in project.rows("silver")]
    assert sorted(silver) == expected_silver(first + second + third) and len(silver) == len(set(silver))


def test_flows_that_already_ran_apart_stay_apart(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(WITH_OPTION)
    project.drop("1.json", events("a", 6))
    run(spark, project)
    (project.root / "transformations" / "defs.py").write_text(PLAIN)
    project.drop("2.json", events("b", 6))
    started = project.pipeline(spark).start("available_now")
    started.finish(threading.Event())
    assert started.queries["silver"] is not started.queries["bronze"]
    layout = project.layout
    assert layout.position("silver", "silver").flow == "silver"
    silver = [r["id"] for r in project.rows("silver")]
    assert sorted(silver) == expected_silver(events("a", 6) + events("b", 6))
