"""Incremental materialized views: each batch's partial aggregate merged in, equal to a full recomputation.

Every check compares the view with the same aggregation run by Spark over the whole input table, after
batches with late rows, nulls in keys, values and measures, a crash between the batch's two commits, and a
changed definition.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from deltaflow.cli.render import text
from deltaflow.errors import FlowError
from helpers import Project, batch_ids

MEASURES = """F.count("*").alias("n"), F.count("user").alias("with_user"),
                 F.countDistinct("user").alias("users"), F.sum("qty").alias("qty"),
                 F.sum("amount").alias("amount"), F.min("amount").alias("low"), F.max("ts").alias("last")"""

PIPELINE = """
import deltaflow as dp
from pyspark.sql import functions as F

@dp.table
def events():
    return dp.read_files("landing", schema="id STRING, user STRING, product STRING, ts TIMESTAMP, "
                                           "amount DOUBLE, qty INT")

@dp.materialized_view(refresh=dp.by_window("ts", "1 hour"))
def gold():
    return (spark.read.table("events").where(F.col("qty") >= 0)
            .groupBy(F.window("ts", "1 hour"), "product")
            .agg(MEASURES))
"""


Groups = dict[tuple[Any, Any], tuple[Any, ...]]


def recomputed(spark: Any, project: Project, measures: str = MEASURES) -> Groups:
    """The view's query run by Spark, as one batch, over every row of its input."""
    from pyspark.sql import functions as F

    events = spark.read.format("delta").load(project.table("events"))
    grouped = events.where(F.col("qty") >= 0).groupBy(F.window("ts", "1 hour"), "product")
    df = grouped.agg(*eval(f"[{measures}]", {"F": F}))
    return by_group([row.asDict(recursive=True) for row in df.collect()])


def by_group(rows: list[dict[str, Any]]) -> Groups:
    result = {}
    for row in rows:
        key = (row["window"]["start"].replace(tzinfo=None), row["product"])
        result[key] = tuple(plain(v) for k, v in sorted(row.items()) if k not in ("window", "product"))
    assert len(result) == len(rows), "duplicate groups"
    return result


def plain(value: Any) -> Any:
    """Comparable across readers: Spark gives naive datetimes, deltalake aware ones; floats to 6 places."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    return round(value, 6) if isinstance(value, float) else value


def view(project: Project) -> Groups:
    return by_group(DeltaTable(project.table("gold")).to_pyarrow_table().to_pylist())


def drop(project: Project, name: str, rows: list[tuple[Any, ...]]) -> None:
    fields = ("id", "user", "product", "ts", "amount", "qty")
    project.drop(name, [dict(zip(fields, row, strict=True)) for row in rows])


FIRST = [("a", "u1", "p1", "2025-05-01T10:00:00Z", 1.5, 1),
         ("b", "u1", "p1", "2025-05-01T10:10:00Z", 2.5, 2),
         ("c", "u2", "p1", "2025-05-01T10:20:00Z", None, 3),
         ("d", None, "p1", "2025-05-01T10:30:00Z", 4.0, 1),
         ("e", "u3", None, "2025-05-01T11:00:00Z", 5.0, 1),
         ("f", "u3", None, "2025-05-01T11:05:00Z", 6.0, None),  # null qty: filtered out too
         ("g", "u4", "p2", "2025-05-01T11:30:00Z", 7.0, -1)]  # negative qty: filtered before the aggregation
LATE = [("h", "u1", "p1", "2025-05-01T10:40:00Z", 0.5, 1),   # a user already counted in 10:00/p1
        ("i", "u9", "p1", "2025-05-01T10:41:00Z", 9.0, 1),   # a new one there
        ("j", "u3", None, "2025-05-01T11:10:00Z", None, 2),  # the null product again
        ("k", "u5", "p3", "2025-05-01T12:00:00Z", 1.0, 1)]   # a new hour


@pytest.fixture
def project(make_project: Callable[..., Project]) -> Project:
    return make_project(PIPELINE.replace("MEASURES", MEASURES))


def test_the_graph_says_which_views_are_incremental_and_why_others_are_not(spark, make_project) -> None:
    defs = PIPELINE.replace("MEASURES", MEASURES) + """
@dp.materialized_view(refresh=dp.by_window("ts", "1 hour"))
def averaged():
    return spark.read.table("events").groupBy(F.window("ts", "1 hour")).agg(F.avg("amount").alias("mean"))

@dp.materialized_view(refresh=dp.by_window("ts", "1 hour"))
def as_of():
    return (dp.read("events", version=0).groupBy(F.window("ts", "1 hour"))
            .agg(F.count("*").alias("n")))

@dp.materialized_view(refresh=dp.by_window("ts", "1 hour"))
def by_day():
    return (spark.read.table("events").groupBy(F.window("ts", "1 hour"), F.to_date("ts").alias("day"))
            .agg(F.count("*").alias("n")))
"""
    project = make_project(defs)
    (project.root / "landing").mkdir()
    picture = text(project.pipeline(spark).dry_run())
    assert ("by window ts 1 hour, incremental in Spark's state: count, count(user), count_distinct(user), "
            "sum(qty), sum(amount), min(amount), max(ts) by window, product") in picture
    assert "windows recomputed: avg(amount) cannot be merged batch by batch" in picture
    assert "events    streaming table, one append per batch" in picture  # how each table is written
    assert "windows recomputed: it groups by an expression (to_date(ts)), not a column" in picture
    assert "windows recomputed: it reads 'events' as of a version" in picture


@pytest.fixture(params=["whole", "merge"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How a batch writes the view: rewritten whole in a commit of deltaflow's (a small view: every group
    from the state, or with a lateness the changed groups among the view's rows), or the changed groups
    MERGEd."""
    from deltaflow.sinks import incremental

    if request.param == "merge":
        monkeypatch.setattr(incremental, "REWRITE_BELOW_BYTES", -1)
    return str(request.param)


def test_batches_merged_in_equal_a_full_recomputation(spark, project: Project, mode: str) -> None:
    drop(project, "first", FIRST)
    project.run(spark)
    assert view(project) == recomputed(spark, project)
    assert len(view(project)) == 2  # 10:00/p1, 11:00/None (p2's only row is filtered out)
    # the query reads each batch twice (once more for the distinct count): Spark counts 14 rows, it read 7
    assert project.rows_read("gold") == project.rows_read("events") == len(FIRST)

    drop(project, "late", LATE)
    project.run(spark)
    merged = view(project)
    assert merged == recomputed(spark, project)
    assert project.rows_read("gold") == len(FIRST) + len(LATE)
    rows = {(r["window"]["start"].hour, r["product"]): r
            for r in DeltaTable(project.table("gold")).to_pyarrow_table().to_pylist()}
    # 10:00/p1: u1 came back (not counted again), u9 is new; a null user is a row but not a user
    assert (rows[10, "p1"]["users"], rows[10, "p1"]["with_user"], rows[10, "p1"]["n"]) == (3, 5, 6)
    assert (rows[10, "p1"]["amount"], rows[10, "p1"]["low"]) == (17.5, 0.5)  # a null amount adds nothing
    assert (rows[11, None]["n"], rows[11, None]["qty"], rows[11, None]["amount"]) == (2, 3, 5.0)
    operation = DeltaTable(project.table("gold")).history(1)[0]["operation"]
    assert operation == ("WRITE" if mode == "whole" else "MERGE")


def test_a_batch_run_again_after_its_state_moved_on_counts_each_value_once(
        spark, project: Project, monkeypatch, mode: str) -> None:
    from deltaflow.sinks.incremental import IncrementalRefresh
    from deltaflow.sinks.materialize import MaterializedView

    drop(project, "first", FIRST)
    project.run(spark)
    writer, method = (IncrementalRefresh, "_replace") if mode == "whole" else (MaterializedView, "merge")
    real = getattr(writer, method)
    crashed: list[str] = []

    def crash_before_the_view(self: Any, df: Any, *args: Any, **kwargs: Any) -> Any:
        if not crashed:  # the batch's totals computed (its state committed), then killed before the view's
            crashed.append(method)
            df.write.format("noop").mode("overwrite").save()
            raise RuntimeError("killed between the state's commit and the view's")
        return real(self, df, *args, **kwargs)

    monkeypatch.setattr(writer, method, crash_before_the_view)
    drop(project, "late", LATE)
    with pytest.raises(FlowError, match="killed between"):
        project.run(spark)
    checkpoint = project.checkpoint("gold")
    assert not (checkpoint / "commits" / "1").exists()  # batch 1 did not finish ...
    assert list((checkpoint / "state").rglob("2.delta"))  # ... but its state had moved on

    project.run(spark)  # batch 1 runs again from the state before it: the same new users, counted once
    assert crashed and view(project) == recomputed(spark, project)
    assert (checkpoint / "commits" / "1").exists()


def test_a_changed_definition_or_mode_rebuilds_the_view(spark, project: Project) -> None:
    drop(project, "first", FIRST)
    project.run(spark)
    wider = MEASURES + ', F.max("amount").alias("high")'
    defs = project.root / "transformations" / "defs.py"
    defs.write_text(defs.read_text().replace(MEASURES, wider))
    drop(project, "late", LATE)
    project.run(spark)
    assert view(project) == recomputed(spark, project, wider)
    assert project.layout.current_generation("gold", "gold") == 1  # a full refresh moved it on
    plan = json.loads(Path(project.layout.checkpoint("gold", "gold").view_plan).read_text())
    assert [m["output"] for m in plan["measures"]][-1] == "high"

    # An average cannot be folded: the view is recomputed by window from a new checkpoint (the incremental
    # one's deduplication state would not fit its driver query), and incremental again once it is gone.
    averaged = wider + ', F.avg("amount").alias("mean")'
    defs.write_text(defs.read_text().replace(wider, averaged))
    drop(project, "more", [("m", "u7", "p1", "2025-05-01T10:50:00Z", 3.0, 1)])
    project.run(spark)
    assert view(project) == recomputed(spark, project, averaged)
    assert project.layout.current_generation("gold", "gold") == 2
    assert not Path(project.layout.checkpoint("gold", "gold").view_plan).exists()
    defs.write_text(defs.read_text().replace(averaged, wider))
    drop(project, "last", [("n", "u8", "p1", "2025-05-01T10:55:00Z", 3.5, 1)])
    project.run(spark)
    assert view(project) == recomputed(spark, project, wider)
    assert project.layout.current_generation("gold", "gold") == 3


def test_a_view_that_outgrows_whole_rewrites_goes_on_merging_from_the_same_state(
        spark, project: Project, monkeypatch) -> None:
    from deltaflow.sinks import incremental

    drop(project, "first", FIRST)
    project.run(spark)  # a small view: every group rewritten
    assert DeltaTable(project.table("gold")).history(1)[0]["operation"] == "WRITE"
    monkeypatch.setattr(incremental, "REWRITE_BELOW_BYTES", -1)  # it has grown: the changed groups merged
    drop(project, "late", LATE)
    project.run(spark)
    assert DeltaTable(project.table("gold")).history(1)[0]["operation"] == "MERGE"
    assert view(project) == recomputed(spark, project)
    monkeypatch.undo()  # and back (a smaller threshold set again)
    drop(project, "more", [("m", "u7", "p1", "2025-05-01T10:50:00Z", 3.0, 1)])
    project.run(spark)
    assert DeltaTable(project.table("gold")).history(1)[0]["operation"] == "WRITE"
    assert view(project) == recomputed(spark, project)
    assert project.layout.current_generation("gold", "gold") == 0  # one checkpoint throughout


LATENESS = PIPELINE.replace('"1 hour"))', '"1 hour", lateness="30 minutes"))')
AHEAD = [("x", "u6", "p1", "2025-05-01T15:00:00Z", 1.0, 1)]  # moves the watermark to 14:30


def state_operators(spark: Any, project: Project) -> list[Any]:
    """The stateful operators of gold's checkpoint (Spark's state metadata: id and name of each)."""
    return spark.read.format("state-metadata").load(str(project.checkpoint("gold"))).collect()


def stored_windows(spark: Any, project: Project) -> set[int]:
    """The hours of the windows in every stateful operator's state (Spark's state data source)."""
    checkpoint = str(project.checkpoint("gold"))
    hours = set()
    for operator in state_operators(spark, project):
        reader = spark.read.format("statestore").option("operatorId", operator["operatorId"])
        if operator["operatorName"] == "transformWithStateExec":  # FirstSeen: each group's values
            reader = reader.option("stateVarName", "seen")
        state = reader.load(checkpoint)
        hours |= {row["key"]["window"]["start"].hour for row in state.select("key").collect()}
    return hours


def test_a_view_with_a_lateness_keeps_recent_windows_and_recomputes_the_late_ones(
        spark, make_project, mode: str) -> None:
    project = make_project(LATENESS.replace("MEASURES", MEASURES))
    drop(project, "first", FIRST)
    project.run(spark)
    assert view(project) == recomputed(spark, project)
    assert stored_windows(spark, project) == {10, 11}
    operators = {o["operatorName"] for o in state_operators(spark, project)}
    assert "transformWithStateExec" in operators  # FirstSeen, not dropDuplicates

    drop(project, "ahead", AHEAD)  # its batch runs with the watermark at 11:00: 10:00's window leaves
    project.run(spark)
    assert view(project) == recomputed(spark, project)
    drop(project, "ahead2", [("y", "u6", "p1", "2025-05-01T15:01:00Z", 1.0, 1)])  # the watermark is 14:30
    project.run(spark)
    assert stored_windows(spark, project) == {15}  # the state holds recent windows only

    drop(project, "late", LATE)  # every row hours late: Spark drops them, their windows are recomputed
    project.run(spark)
    assert view(project) == recomputed(spark, project)
    rows = {(r["window"]["start"].hour, r["product"]): r
            for r in DeltaTable(project.table("gold")).to_pyarrow_table().to_pylist()}
    assert (rows[10, "p1"]["users"], rows[10, "p1"]["n"]) == (3, 6)  # u1 once, u9 new: exact
    last = DeltaTable(project.table("gold")).history(1)[0]
    assert last["operation"] == "WRITE" and "predicate" in last["operationParameters"]  # by window
    # each batch's changed groups: folded into the view's rows and the view rewritten, or MERGEd
    commits = [(c["operation"], "predicate" in c["operationParameters"])
               for c in reversed(DeltaTable(project.table("gold")).history())]
    batches = [c for c in commits if c != ("WRITE", True)][2:]  # after its creation and batch 0's
    assert batches == ([("WRITE", False)] if mode == "whole" else [("MERGE", True)]) * 3
    assert stored_windows(spark, project) == {15}
    commits = project.checkpoint("gold") / "commits"
    # one batch per run with rows: none of the batches Spark would add only to drop old state
    assert sorted(int(c.name) for c in commits.iterdir() if c.name.isdigit()) == [0, 1, 2, 3]
    gold = next(flow for flow in project.pipeline(spark).status() if flow.flow == "gold")
    assert gold.last_refresh_mode == "incremental" and gold.rows_written
    every = len(FIRST) + len(AHEAD) + 1 + len(LATE)
    assert project.rows_read("gold") == project.rows_read("events") == every  # each row read once, late too


def test_late_windows_recomputed_after_a_crash_between_the_two_writes(
        spark, make_project, monkeypatch) -> None:
    from deltaflow.sinks.materialize import MaterializedView

    project = make_project(LATENESS.replace("MEASURES", MEASURES))
    drop(project, "first", FIRST + AHEAD)
    project.run(spark)
    drop(project, "ahead2", [("y", "u6", "p1", "2025-05-01T15:01:00Z", 1.0, 1)])
    project.run(spark)
    real = MaterializedView.recompute_windows
    crashed: list[int] = []

    def crash_before_the_late_windows(self: Any, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("late") and not crashed:
            crashed.append(1)
            raise RuntimeError("killed between the batch's write and the late windows'")
        real(self, *args, **kwargs)

    monkeypatch.setattr(MaterializedView, "recompute_windows", crash_before_the_late_windows)
    drop(project, "late", LATE)
    with pytest.raises(FlowError, match="killed between"):
        project.run(spark)
    assert view(project) != recomputed(spark, project)  # the batch's write committed, its late rows not
    project.run(spark)  # the batch runs again: its write is skipped, its late windows found again
    assert crashed and view(project) == recomputed(spark, project)


def test_a_view_with_a_lateness_on_another_state_store_stops_naming_the_setting(
        spark, make_project) -> None:
    from deltaflow.sinks.state_store import PROVIDER

    project = make_project(LATENESS.replace("MEASURES", MEASURES))
    drop(project, "first", FIRST)
    hdfs = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    spark.conf.set(PROVIDER, hdfs)
    try:
        with pytest.raises(FlowError, match=f"view 'gold' has a lateness.*names {hdfs}"):
            project.run(spark)
    finally:
        spark.conf.unset(PROVIDER)
    assert batch_ids(project.checkpoint("gold") / "commits") == set()  # stopped before its first batch


def test_a_view_s_table_and_inputs_are_sized_as_their_delta_files(spark, tmp_path: Path) -> None:
    # what chooses between rewriting a view whole and by window: sized from the tables' snapshots
    from deltaflow.sinks.materialize import input_bytes, table_bytes
    from deltaflow.storage import StorageLayout

    paths = [str(tmp_path / name) for name in ("a", "b")]
    for i, path in enumerate(paths):
        for n in range(i + 2):
            spark.range(n * 10, n * 10 + 10).write.format("delta").mode("append").save(path)
    files = [sum(f.stat().st_size for f in Path(p).glob("*.parquet")) for p in paths]  # appends: all current
    a, b = (spark.read.format("delta").load(p) for p in paths)
    assert input_bytes(a.join(b, "id").groupBy("id").count()) == sum(files)
    assert table_bytes(StorageLayout(str(tmp_path)), paths[1]) == files[1]
