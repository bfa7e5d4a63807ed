"""Carried flows (deltaflow.sinks.carry): silver written from bronze's micro-batches, one query for both.

Checked against Delta as written (read back with deltalake): each table exactly its rows, each commit
stamped by its own flow; two flows in the event log and in status. Carrying is how flows run, never what a
verb does: every per-table verb (``--refresh``, ``--full-refresh``, ``rewind``, a changed definition)
gives the same tables and the same outcomes with carrying on and off, and a carried flow leaves its
carrier without being rebuilt, and joins it again once it has caught up. A flow that keeps state is not
carried (its state could not leave).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import timedelta

import pytest

from deltaflow.cli.render import text
from deltaflow.commands.vacuum import vacuum_retention
from deltaflow.errors import ConfigError
from deltaflow.runtime.run_plan import RunPlan
from deltaflow.sinks.carry import carried_flows, carrier_of
from helpers import Project

DEFS = """
import deltaflow as dp
from pyspark.sql import functions as F

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING, user STRING, ts TIMESTAMP, amount DOUBLE")

@dp.table
def silver():
    return {read}.where(F.col("amount") > {floor}).drop("_corrupt_record")
"""
PLAIN = DEFS.format(read='spark.readStream.table("bronze")', floor=0)
WITH_OPTION = DEFS.format(read='spark.readStream.option("maxFilesPerTrigger", 100).table("bronze")', floor=0)
FIXED = DEFS.format(read='spark.readStream.table("bronze")', floor=1)  # seed 004: the logic, fixed
STATEFUL = PLAIN.replace('.drop("_corrupt_record")',
                         '.withWatermark("ts", "1 hour").dropDuplicatesWithinWatermark(["id"])')


def events(tag: str, count: int) -> list[dict[str, object]]:
    rows = [{"id": f"{tag}{i}", "user": f"u{i % 3}", "ts": f"2026-11-26T10:{i:02d}:00Z",
             "amount": float(i % 4)} for i in range(count)]
    return rows + rows[:2]  # a producer's retry: two events twice


def positive(all_events: list[dict[str, object]], floor: float = 0) -> list[str]:
    return sorted(str(e["id"]) for e in all_events if float(e["amount"]) > floor)  # type: ignore[arg-type]


def run(spark, project: Project, plan: RunPlan | None = None,  # type: ignore[no-untyped-def]
        messages: list[str] | None = None) -> list[tuple[str, str]]:
    pipeline = project.pipeline(spark)
    started = pipeline.start("available_now", plan=plan, on_message=(messages or []).append)
    return sorted((o.flow, o.state) for o in started.finish(threading.Event()))


def ids(project: Project, table: str) -> list[str]:
    return sorted(str(r["id"]) for r in project.rows(table))


def version(project: Project, table: str) -> int:
    return project.layout.open_table(project.table(table)).version()


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
    assert ids(project, "silver") == positive(first)

    second = events("b", 8)
    project.drop("2.json", second)
    run(spark, project)
    assert len(project.rows("bronze")) == len(first) + len(second)
    assert ids(project, "silver") == positive(first + second)

    # each table's commits carry their own flow's stamp; both flows are in the event log and in status
    writers = {v.flow for v in pipeline.history("silver") if v.operation != "CREATE TABLE"}
    assert writers == {"silver"}
    status = {s.flow: s for s in pipeline.status()}
    assert status["silver"].last_batch == status["bronze"].last_batch is not None


def test_a_flow_that_keeps_state_runs_in_a_query_of_its_own(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(STATEFUL)
    project.drop("1.json", events("a", 6))
    pipeline = project.pipeline(spark)
    resolver = pipeline.dry_run()
    assert carrier_of(resolver, "silver") == (
        None, "it keeps state (DeduplicateWithinWatermark), which could not leave 'bronze''s query")
    assert "micro-batches" not in text(resolver)
    started = pipeline.start("available_now")
    started.finish(threading.Event())
    assert started.queries["silver"] is not started.queries["bronze"]
    assert ids(project, "silver") == sorted(set(positive(events("a", 6))))


def test_a_carried_flow_that_stops_qualifying_goes_on_alone_without_a_rebuild(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(PLAIN)
    first = events("a", 10)
    project.drop("1.json", first)
    run(spark, project)
    layout = project.layout
    assert layout.position("silver", "silver").flow == "bronze"
    silver_version = version(project, "silver")

    # silver now reads bronze with an option: it can no longer be carried, and goes on from where it was
    (project.root / "transformations" / "defs.py").write_text(WITH_OPTION)
    second = events("b", 6)
    project.drop("2.json", second)
    messages: list[str] = []
    run(spark, project, messages=messages)
    assert not any("full refresh" in m for m in messages), messages
    assert [layout.current_generation(t, t) for t in ("bronze", "silver")] == [1, 1]
    assert layout.position("silver", "silver").flow == "silver"
    assert carried_flows(layout, layout.checkpoint("bronze", "bronze")) == []
    assert len(project.rows("bronze")) == len(first) + len(second)  # bronze went on where it stood
    assert ids(project, "silver") == positive(first + second)
    assert [v.operation for v in project.pipeline(spark).history("silver", limit=0)
            if v.version > silver_version] == ["STREAMING UPDATE"]  # one batch appended, nothing replaced

    third = events("c", 5)
    project.drop("3.json", third)
    run(spark, project)
    assert len(project.rows("bronze")) == len(first) + len(second) + len(third)
    assert ids(project, "silver") == positive(first + second + third)


def test_flows_that_ran_apart_are_written_together_once_the_reader_has_caught_up(  # type: ignore[no-untyped-def]
        spark, make_project) -> None:
    project = make_project(WITH_OPTION)
    project.drop("1.json", events("a", 6))
    run(spark, project)
    (project.root / "transformations" / "defs.py").write_text(PLAIN)
    project.drop("2.json", events("b", 6))
    started = project.pipeline(spark).start("available_now")
    started.finish(threading.Event())
    assert started.queries["silver"] is started.queries["bronze"]  # silver had read all of bronze
    layout = project.layout
    assert layout.position("silver", "silver") == layout.checkpoint("bronze", "bronze")
    assert [layout.current_generation(t, t) for t in ("bronze", "silver")] == [1, 1]
    assert ids(project, "silver") == positive(events("a", 6) + events("b", 6))
    assert len(project.rows("bronze")) == 16


def test_every_per_table_verb_gives_the_same_tables_carried_or_not(  # type: ignore[no-untyped-def]
        spark, make_project, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same scenario on two projects, one carried and one run with DELTAFLOW_CARRY=0."""
    carried, alone = make_project(PLAIN, name="carried"), make_project(PLAIN, name="alone")

    def both(step: Callable[[Project], object]) -> tuple[object, object]:
        answers = []
        for project, on in ((carried, "1"), (alone, "0")):
            monkeypatch.setenv("DELTAFLOW_CARRY", on)
            answers.append(step(project))
        if carried.layout.fs.exists(f"{carried.table('silver')}/_delta_log"):
            assert ids(carried, "bronze") == ids(alone, "bronze")
            assert ids(carried, "silver") == ids(alone, "silver")
        return answers[0], answers[1]

    def drop(name: str, rows: list[dict[str, object]]) -> Callable[[Project], object]:
        return lambda p: p.drop(name, rows)

    both(drop("1.json", events("a", 8)))
    first = both(lambda p: run(spark, p))
    assert first[0] == first[1] == [("bronze", "completed"), ("silver", "completed")]
    assert carried.layout.position("silver", "silver").flow == "bronze"
    assert alone.layout.position("silver", "silver").flow == "silver"

    # --refresh bronze writes bronze only: silver's table keeps its version
    both(drop("2.json", events("b", 8)))
    silver_at = both(lambda p: version(p, "silver"))
    outcomes = both(lambda p: run(spark, p, RunPlan(refresh=frozenset({"bronze"}))))
    assert outcomes[0] == outcomes[1] == [("bronze", "completed")]
    assert both(lambda p: version(p, "silver")) == silver_at
    assert ids(carried, "silver") == positive(events("a", 8))
    assert len(carried.rows("bronze")) == 20

    def vacuum_refused(project: Project) -> str:  # silver still needs bronze's new files, where it stands
        with pytest.raises(ConfigError) as refused:
            vacuum_retention(project.layout, ["silver"], "bronze", timedelta(0), stopped=True)
        return str(refused.value).split(", committed")[0]
    refusals = both(vacuum_refused)
    assert refusals[0] == refusals[1] and "flow 'silver' still reads it from version" in refusals[0]

    # then silver alone catches up from where it stood: every row once
    outcomes = both(lambda p: run(spark, p, RunPlan(refresh=frozenset({"silver"}))))
    assert outcomes[0] == outcomes[1] == [("silver", "completed")]
    assert ids(carried, "silver") == positive(events("a", 8) + events("b", 8))

    # rewind silver to its first batch, fix its logic, and replay it from there (seed 004)
    both(lambda p: p.pipeline(spark).rewind("silver", version=1))
    assert ids(carried, "silver") == positive(events("a", 8))
    both(lambda p: (p.root / "transformations" / "defs.py").write_text(FIXED))
    both(drop("3.json", events("c", 8)))
    outcomes = both(lambda p: run(spark, p))
    assert outcomes[0] == outcomes[1]
    assert ids(carried, "silver") == sorted(positive(events("a", 8))
                                            + positive(events("b", 8) + events("c", 8), floor=1))

    # a full refresh of silver rebuilds it through the fixed logic, carried or not
    both(lambda p: run(spark, p, RunPlan(full_refresh=frozenset({"silver"}))))
    assert ids(carried, "silver") == positive(events("a", 8) + events("b", 8) + events("c", 8), floor=1)
    both(drop("4.json", events("d", 4)))
    both(lambda p: run(spark, p))
    assert len(carried.rows("bronze")) == 10 + 10 + 10 + 6  # every event once (and the retries)
    assert ids(carried, "silver") == positive(
        events("a", 8) + events("b", 8) + events("c", 8) + events("d", 4), floor=1)
    # silver had caught up with bronze when that run started: the two were written together again
    assert carried.layout.position("silver", "silver").flow == "bronze"
    assert alone.layout.position("silver", "silver").flow == "silver"
    both(drop("5.json", events("e", 4)))
    both(lambda p: run(spark, p))
    assert ids(carried, "silver") == positive(
        events("a", 8) + events("b", 8) + events("c", 8) + events("d", 4) + events("e", 4), floor=1)


def test_a_leave_or_a_join_interrupted_after_its_first_record_is_finished_by_the_next_run(  # type: ignore[no-untyped-def]
        spark, make_project) -> None:
    """Leaving writes silver's start, then moves bronze; a crash between the two is finished, once."""
    from deltaflow.runtime.carry_plan import position_after_carry

    project = make_project(PLAIN)
    project.drop("1.json", events("a", 8))
    run(spark, project)
    layout = project.layout
    carrier, own = layout.checkpoint("bronze", "bronze"), layout.checkpoint("silver", "silver")
    start = position_after_carry(layout, own, carrier)
    assert start == version(project, "bronze") + 1  # silver has read all bronze wrote
    # the first record of a leave, as a crash after it left it: silver's own start, bronze not moved
    layout.fs.write_text(layout.checkpoint("silver", "silver", 1).starts_at,
                         json.dumps({"table": "bronze", "version": start}))
    project.drop("2.json", events("b", 8))
    run(spark, project, RunPlan(refresh=frozenset({"bronze"})))  # bronze alone: its move is finished now
    assert carried_flows(layout, layout.checkpoint("bronze", "bronze")) == []
    assert layout.current_generation("bronze", "bronze") == 1 and ids(project, "silver") == positive(
        events("a", 8))
    run(spark, project)
    assert ids(project, "silver") == positive(events("a", 8) + events("b", 8))
    assert len(project.rows("bronze")) == 20

    # silver has caught up: the next run joins it to bronze's query again. A join interrupted right after
    # its first record (bronze's next generation, before its copy) is finished by the next run, once.
    assert layout.position("silver", "silver").flow == "silver"
    bronze = layout.checkpoint("bronze", "bronze")
    record = {"generation": bronze.generation, "read": version(project, "bronze"),
              "flows": {"silver": layout.current_generation("silver", "silver")}}
    layout.fs.write_text(layout.checkpoint("bronze", "bronze", bronze.generation + 1).joined_from,
                         json.dumps(record))
    project.drop("3.json", events("c", 8))
    run(spark, project)
    assert layout.position("silver", "silver") == layout.checkpoint("bronze", "bronze")
    assert ids(project, "silver") == positive(events("a", 8) + events("b", 8) + events("c", 8))
    assert len(project.rows("bronze")) == 30
