"""Schema changes: an added column evolves the tables that opt in and stops the others with a named error;
a renamed column stops only its flow, with the command that recovers it."""

from __future__ import annotations

import textwrap
import threading
from typing import Any

from deltalake import DeltaTable

from deltaflow.pipeline import Pipeline
from deltaflow.runtime.outcomes import FlowOutcome
from deltaflow.runtime.run_plan import RunPlan
from deltaflow.spec import load_spec
from helpers import Project

DEFS = """
import deltaflow as dp

@dp.table(merge_schema=True)
def bronze():
    return dp.read_files("landing", schema="{schema}").drop("_corrupt_record", "ingested_at")

@dp.table(merge_schema=True)
def silver():
    return spark.readStream.table("bronze"){silver}

@dp.table(merge_schema={strict_merges})
def strict():
    return spark.readStream.table("bronze")
"""


def define(project: Project, schema: str, silver: str = "", strict_merges: bool = False) -> None:
    (project.root / "transformations" / "defs.py").write_text(textwrap.dedent(DEFS.format(
        schema=schema, silver=silver, strict_merges=strict_merges)))


def run(spark, project: Project, plan: RunPlan | None = None) -> dict[str, FlowOutcome]:  # type: ignore[no-untyped-def]
    spec = load_spec(project.spec_path)
    pipeline = Pipeline(spec, spark=spark).start("available_now", plan=plan)
    return {o.flow: o for o in pipeline.wait(threading.Event())}


def rows(project: Project, table: str) -> list[dict[str, Any]]:
    return sorted(DeltaTable(project.table(table)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


def test_added_column_evolves_opted_in_tables_a_rename_stops_its_flow(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project("")
    define(project, "id STRING, amount DOUBLE")
    project.drop("1.json", [{"id": "a", "amount": 1.0}])
    assert {f: o.state for f, o in run(spark, project).items()} == dict.fromkeys(
        ("bronze", "silver", "strict"), "completed")

    # A field is added to the events, and to the declared schema.
    define(project, "id STRING, amount DOUBLE, coupon STRING")
    project.drop("2.json", [{"id": "b", "amount": 2.0, "coupon": "WELCOME"}])
    outcomes = run(spark, project)
    assert (outcomes["bronze"].state, outcomes["silver"].state) == ("completed", "completed")
    assert outcomes["strict"].state == "failed"
    error = str(outcomes["strict"].error)
    assert "writes new column(s) 'coupon' (string) that table 'strict' does not have" in error
    assert "merge_schema=True" in error
    assert [(r["id"], r["coupon"]) for r in rows(project, "silver")] == [("a", None), ("b", "WELCOME")]
    assert [r["id"] for r in rows(project, "strict")] == ["a"] and "coupon" not in rows(project, "strict")[0]

    # Opting in takes the column, and the rows the flow had not written yet.
    define(project, "id STRING, amount DOUBLE, coupon STRING", strict_merges=True)
    assert run(spark, project)["strict"].state == "completed"
    assert [(r["id"], r["coupon"]) for r in rows(project, "strict")] == [("a", None), ("b", "WELCOME")]

    # silver renames a column: silver stops with the named error and the way out; the others go on.
    define(project, "id STRING, amount DOUBLE, coupon STRING", silver='.withColumnRenamed("amount", "total")',
           strict_merges=True)
    project.drop("3.json", [{"id": "c", "amount": 3.0, "coupon": None}])
    outcomes = run(spark, project)
    assert {f: o.state for f, o in outcomes.items()} == {"bronze": "completed", "silver": "failed",
                                                         "strict": "completed"}
    error = str(outcomes["silver"].error)
    assert "no longer writes column(s) 'amount' of table 'silver', and writes new column(s) 'total' " \
        "(double)" in error and "deltaflow run --full-refresh silver" in error
    assert [r["id"] for r in rows(project, "silver")] == ["a", "b"]  # nothing written with a wrong shape
    assert [r["id"] for r in rows(project, "strict")] == ["a", "b", "c"]

    # The recovery the error names: a full refresh of silver.
    assert run(spark, project, RunPlan(full_refresh=frozenset({"silver"})))["silver"].state == "completed"
    assert [(r["id"], r["total"]) for r in rows(project, "silver")] == [("a", 1.0), ("b", 2.0), ("c", 3.0)]


CONTINUOUS = """
import deltaflow as dp

@dp.table(merge_schema=True)
def evolving():
    return spark.readStream.format("delta").load({external!r})

@dp.table
def strict():
    return spark.readStream.format("delta").load({external!r})
"""


def test_a_column_added_upstream_during_a_continuous_run(spark, make_project, tmp_path) -> None:  # type: ignore[no-untyped-def]
    external = str(tmp_path / "external")
    spark.createDataFrame([("a", 1)], "id STRING, n INT").write.format("delta").save(external)
    project = make_project(CONTINUOUS.format(external=external))
    spec = load_spec(project.spec_path)
    messages: list[str] = []
    pipeline = Pipeline(spec, spark=spark).start("continuous", "1 second", on_message=messages.append)
    stop = threading.Event()
    outcomes: dict[str, FlowOutcome] = {}
    watcher = threading.Thread(target=lambda: outcomes.update({o.flow: o for o in pipeline.wait(stop)}))
    watcher.start()
    try:
        def state() -> str:  # what a timeout shows: the run's messages and the flows that ended
            ended = {name: (o.state, o.error) for name, o in pipeline.finished.items()}
            queries = {name: (q.isActive, str(q.exception())[:300]) for name, q in pipeline.queries.items()}
            return f"messages: {messages}; ended: {ended}; queries: {queries}; " \
                f"rows: {rows(project, 'evolving')}"

        wait_until(lambda: all(len(rows(project, t)) == 1 for t in ("evolving", "strict")), "the first rows",
                   state)
        spark.createDataFrame([("b", 2, "new")], "id STRING, n INT, extra STRING").write.format("delta") \
            .mode("append").option("mergeSchema", "true").save(external)
        wait_until(lambda: [r.get("extra") for r in rows(project, "evolving")] == [None, "new"],
                   "the new column in 'evolving'", state)
        wait_until(lambda: "strict" in pipeline.finished, "'strict' to stop", state)
    finally:
        stop.set()
        watcher.join(timeout=180)
    assert outcomes["evolving"].state == "stopped"  # still running when asked to stop
    assert outcomes["strict"].state == "failed"
    error = str(outcomes["strict"].error)
    assert "writes new column(s) 'extra' (string) that table 'strict' does not have" in error
    assert [r["id"] for r in rows(project, "strict")] == ["a"]
    assert any("evolving: a table it reads changed schema" in m for m in messages)


def wait_until(condition, what: str, state, timeout: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what} ({state()})"
        time.sleep(0.2)
