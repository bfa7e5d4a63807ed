"""Where each stream reading a table stands, read from its checkpoint: what a safe VACUUM must keep."""

from __future__ import annotations

from datetime import UTC, datetime

from deltalake import DeltaTable

from deltaflow.commands.readers import stream_positions
from deltaflow.runtime.runner import RunPlan

PIPELINE = """
import deltaflow as dp

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING")

@dp.table
def silver():
    return dp.read_stream("bronze").where("id != 'x'")

@dp.materialized_view
def counts():
    return spark.read.table("bronze").groupBy().count()
"""


def test_a_stopped_reader_keeps_its_position_while_the_table_moves_on(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(PIPELINE)
    pipeline = project.pipeline(spark)
    project.drop("0.json", [{"id": "a"}])
    pipeline.run("available_now")
    bronze = DeltaTable(project.table("bronze"))
    caught_up = stream_positions(pipeline.resolve(), project.layout, "bronze")
    # Only the stream reads count (the view reads the newest snapshot); it has read every version.
    assert [(p.flow, p.version) for p in caught_up] == [("silver", bronze.version() + 1)]
    assert caught_up[0].committed_at is None  # that version is not written yet

    for i in (1, 2):  # silver stopped: bronze moves on without it
        project.drop(f"{i}.json", [{"id": f"b{i}"}])
        pipeline.run("available_now", plan=RunPlan(refresh=frozenset({"bronze"})))
    stopped = stream_positions(pipeline.resolve(), project.layout, "bronze")
    assert [p.version for p in stopped] == [caught_up[0].version]
    bronze.update_incremental()
    written = {h["version"]: h["timestamp"] for h in bronze.history()}
    needed_since = datetime.fromtimestamp(written[stopped[0].version] / 1000, UTC)
    assert stopped[0].committed_at == needed_since and stopped[0].age() is not None

    pipeline.run("available_now")
    bronze.update_incremental()
    assert [p.version for p in stream_positions(pipeline.resolve(), project.layout, "bronze")] == [
        bronze.version() + 1]
