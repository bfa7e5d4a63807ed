"""A materialized view downstream of a full-refreshed table: the run succeeds and the view stays exact.

A full refresh replaces the table's rows in one overwrite commit; the view (downstream, so refreshed too)
starts a new driver at that commit, whose first batch recomputes it whole. Each kind of view is checked
against its query over the table, read back with ``deltalake``, then again after a run with new rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deltalake import DeltaTable

from deltaflow.runtime.run_plan import RunPlan
from deltaflow.sinks import incremental, materialize
from helpers import Project

PIPELINE = """
import deltaflow as dp
from pyspark.sql import functions as F

@dp.table
def events():
    return dp.read_files("landing", schema="id STRING, product STRING, ts TIMESTAMP, amount DOUBLE")
"""
VIEW = """
@dp.materialized_view{refresh}
def {name}():
    return (spark.read.table("events").groupBy({groups})
            .agg(F.count("*").alias("n"), F.{measure}("amount").alias("amount")))
"""
BY_WINDOW = '(refresh=dp.by_window("ts", "1 hour"))'
HOURLY = 'F.window("ts", "1 hour"), "product"'
#: view -> (refresh, groups, measure, the operation of a later batch's commit to it)
VIEWS = {"plain": ("", '"product"', "avg", "WRITE"),  # recomputed whole at every batch
         "by_window": (BY_WINDOW, HOURLY, "avg", "WRITE"),  # an average: the windows a batch touches
         "incremental": (BY_WINDOW, HOURLY, "sum", "MERGE")}  # decomposable: merged batch by batch


def group(view: str, row: dict[str, Any]) -> tuple[Any, ...]:
    """The group of ``row``, a row of ``events`` or of view ``view``."""
    if view == "plain":
        return (row["product"],)
    hour = row["window"]["start"] if "window" in row else row["ts"].replace(minute=0, second=0, microsecond=0)
    return hour.replace(tzinfo=None), row["product"]


def expected(project: Project, view: str) -> dict[tuple[Any, ...], tuple[int, float]]:
    """View ``view``'s query over every row of ``events``, in plain Python."""
    amounts: dict[tuple[Any, ...], list[float]] = {}
    for row in project.rows("events"):
        amounts.setdefault(group(view, row), []).append(row["amount"])
    average = VIEWS[view][2] == "avg"
    return {key: (len(values), round(sum(values) / (len(values) if average else 1), 6))
            for key, values in amounts.items()}


def actual(project: Project, view: str) -> dict[tuple[Any, ...], tuple[int, float]]:
    """View ``view``'s rows as ``deltalake`` reads them."""
    rows = project.rows(view)
    result = {group(view, row): (row["n"], round(row["amount"], 6)) for row in rows}
    assert len(result) == len(rows), f"{view}: duplicate groups"
    return result


def exact(project: Project) -> None:
    for view in VIEWS:
        assert actual(project, view) == expected(project, view), view


def drop(project: Project, name: str, rows: list[tuple[str, str, str, float]]) -> None:
    project.drop(name, [dict(zip(("id", "product", "ts", "amount"), row, strict=True)) for row in rows])


def test_views_are_recomputed_after_a_full_refresh_upstream_and_go_on_exactly(  # type: ignore[no-untyped-def]
        spark, make_project: Callable[..., Project], monkeypatch) -> None:
    """Issue 73's rule: the verb works on every table, whatever kind of view reads it."""
    monkeypatch.setattr(materialize, "FULL_BELOW_BYTES", 0)  # later batches by window, however small
    monkeypatch.setattr(incremental, "REWRITE_BELOW_BYTES", -1)  # and changed groups merged
    views = "".join(VIEW.format(name=name, refresh=refresh, groups=groups, measure=measure)
                    for name, (refresh, groups, measure, _) in VIEWS.items())
    project = make_project(PIPELINE + views)
    drop(project, "first", [("a", "p1", "2025-05-01T10:00:00Z", 1.0),
                            ("b", "p1", "2025-05-01T10:30:00Z", 2.0),
                            ("c", "p2", "2025-05-01T11:00:00Z", 4.0)])
    project.pipeline(spark).run("available_now")
    exact(project)

    outcomes = project.pipeline(spark).run("available_now", plan=RunPlan(full_refresh=frozenset({"events"})))
    assert {o.flow: o.state for o in outcomes} == dict.fromkeys(["events", *VIEWS], "completed")
    layout = project.layout
    assert {layout.current_generation(d, d) for d in ("events", *VIEWS)} == {1}  # all rebuilt
    # the overwrite the views' new drivers start at
    assert DeltaTable(project.table("events")).history(1)[0]["operation"] == "WRITE"
    assert len(project.rows("events")) == 3
    exact(project)

    # New rows once, nothing twice: a late row in an hour the views hold, and a new hour.
    drop(project, "second", [("d", "p1", "2025-05-01T10:45:00Z", 8.0),
                             ("e", "p3", "2025-05-01T12:00:00Z", 16.0)])
    project.pipeline(spark).run("available_now")
    assert len(project.rows("events")) == 5
    exact(project)
    assert {v: DeltaTable(project.table(v)).history(1)[0]["operation"] for v in VIEWS} == {
        v: operation for v, (*_, operation) in VIEWS.items()}
