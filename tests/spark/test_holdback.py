"""Rule 13, a failed flow holds back its readers: they are skipped for the run, say why, and run the next."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from deltaflow.errors import FlowError
from deltaflow.runtime.outcomes import FlowOutcome

PIPELINE = """
import deltaflow as dp
from pyspark.sql import functions as F

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING, amount DOUBLE")

@dp.RULE("non_negative", "amount >= 0")
@dp.table
def silver():
    return spark.readStream.table("bronze").drop("_corrupt_record", "ingested_at")

@dp.temporary_view
def positive():
    return spark.read.table("silver").where("amount > 0")

@dp.materialized_view
def gold():
    return spark.read.table("positive").agg(F.count("*").alias("n"))

@dp.materialized_view
def platinum():
    return spark.read.table("gold")

@dp.table
def audit():
    return spark.readStream.table("bronze").select("id")
"""

CARRIED = """
import deltaflow as dp
from pyspark.sql import functions as F

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING")

@dp.table
def copy():
    return spark.readStream.table("bronze").select(
        "id", F.when(F.col("id") == "boom", F.raise_error(F.lit("boom row"))).otherwise(1).alias("ok"))

@dp.materialized_view
def summary():
    return spark.read.table("copy").agg(F.count("*").alias("n"))
"""


def by_flow(outcomes: tuple[FlowOutcome, ...] | list[FlowOutcome]) -> dict[str, FlowOutcome]:
    return {o.flow: o for o in outcomes}


def test_the_flows_downstream_of_a_failed_flow_are_skipped_and_run_the_next_time(  # type: ignore[no-untyped-def]
        spark, make_project) -> None:
    project = make_project(PIPELINE.replace("RULE", "expect_or_fail"))
    project.drop("1.json", [{"id": i, "amount": n} for i, n in (("a", 5.0), ("b", -1.0), ("c", 2.0))])
    with pytest.raises(FlowError) as info:
        project.run(spark)
    message = str(info.value)
    assert "1 flow failed: 'silver' (" in message and "; skipped downstream: 'gold', 'platinum'" in message
    ended = by_flow(info.value.outcomes)
    assert {n: o.state for n, o in ended.items()} == {"bronze": "completed", "silver": "failed",
                                                      "gold": "skipped", "platinum": "skipped",
                                                      "audit": "completed"}
    # through the temporary view, and transitively through gold: each names the flow that failed
    assert [(ended[n].error, ended[n].upstream) for n in ("gold", "platinum")] == [
        ("upstream 'silver' failed", "silver")] * 2
    for view in ("gold", "platinum"):  # never refreshed on partial input: only the table's creation
        table = DeltaTable(project.table(view))
        assert table.version() == 0 and table.to_pyarrow_table().num_rows == 0, view
    assert sorted(r["id"] for r in project.rows("audit")) == ["a", "b", "c"]  # another branch ran

    log = project.layout.open_table(project.layout.event_log).to_pyarrow_table().to_pylist()
    ends = {e["flow"]: (e["kind"], e["error"]) for e in log if e["kind"] != "batch"}
    assert ends["gold"] == ends["platinum"] == ("skipped", "upstream 'silver' failed")
    status = {s.flow: s for s in project.pipeline().status()}  # from the event log, without Spark
    assert (status["gold"].state, status["gold"].error) == ("skipped", "upstream 'silver' failed")
    assert status["silver"].state == "failed" and status["audit"].state == "completed"

    project = make_project(PIPELINE.replace("RULE", "expect_or_drop"))  # fixed: the next run runs them all
    assert {o.flow: o.state for o in project.run(spark)} == dict.fromkeys(ended, "completed")
    assert project.rows("gold") == project.rows("platinum") == [{"n": 2}]
    assert {s.flow: s.state for s in project.pipeline().status()}["gold"] == "completed"


def test_the_readers_of_a_flow_failing_in_its_carrier_s_query_are_skipped(  # type: ignore[no-untyped-def]
        spark, make_project) -> None:
    project = make_project(CARRIED)
    project.drop("1.json", [{"id": "ok"}, {"id": "boom"}])
    with pytest.raises(FlowError, match="skipped downstream: 'summary'"):
        project.run(spark)
    ended = {s.flow: s for s in project.pipeline().status()}  # the outcomes, as the event log has them
    error = ended["copy"].error or ""
    assert "boom row" in error and "written with 'bronze'" in error
    assert (ended["summary"].state, ended["summary"].error) == ("skipped", "upstream 'copy' failed")
    assert ended["bronze"].state == "completed"  # the carrier went on alone
    assert DeltaTable(project.table("summary")).version() == 0
