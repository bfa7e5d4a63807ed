"""Expectations: warn, drop, quarantine and fail rules on a streaming table; counts in the event log."""

from __future__ import annotations

import json
from typing import Any

import pytest
from deltalake import DeltaTable

from deltaflow.errors import FlowError
from deltaflow.pipeline import Pipeline
from deltaflow.spec import load_spec
from helpers import Project

RULES = """
import deltaflow as dp

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING, amount DOUBLE, kind STRING")

@dp.expect("has_kind", "kind IS NOT NULL")
@dp.expect_or_drop("positive", "amount > 0")
@dp.table
@dp.expect_or_quarantine("has_id", "id IS NOT NULL")
@dp.expect_all_or_quarantine({"known_kind": "kind IN ('a', 'b') OR kind IS NULL"})
def silver():
    return spark.readStream.table("bronze").drop("_corrupt_record", "ingested_at")
"""


def run(spark, project: Project) -> None:  # type: ignore[no-untyped-def]
    spec = load_spec(project.spec_path)
    Pipeline(spec, spark=spark).run("available_now")


def table(project: Project, name: str) -> list[dict[str, Any]]:
    return DeltaTable(project.table(name)).to_pyarrow_table().to_pylist()


def test_rules_keep_drop_and_quarantine_rows_and_every_row_is_accounted_for(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(RULES)
    records = [
        {"id": "ok1", "amount": 5.0, "kind": "a"},
        {"id": "ok2", "amount": 1.0, "kind": None},         # warned (has_kind), kept
        {"id": "neg", "amount": -1.0, "kind": "b"},         # dropped (positive)
        {"id": None, "amount": 2.0, "kind": "a"},           # quarantined (has_id)
        {"id": "odd", "amount": 3.0, "kind": "zzz"},        # quarantined (known_kind)
        {"id": None, "amount": -4.0, "kind": "zzz"},        # both quarantine rules, and drop: quarantine wins
    ]
    project.drop("1.json", records)
    run(spark, project)

    assert sorted(r["id"] for r in table(project, "silver")) == ["ok1", "ok2"]
    quarantine = {json.loads(r["record"])["amount"]: r for r in table(project, "silver_quarantine")}
    assert sorted(quarantine) == [-4.0, 2.0, 3.0]
    assert quarantine[2.0]["failed_expectations"] == ["has_id"]
    assert quarantine[3.0]["failed_expectations"] == ["known_kind"]
    assert sorted(quarantine[-4.0]["failed_expectations"]) == ["has_id", "known_kind"]
    for row in quarantine.values():
        assert row["flow"] == "silver" and row["batch_id"] == 0 and row["quarantined_at"] is not None
        assert row["source_file"].endswith("1.json")
        assert json.loads(row["record"])["source_file"] == row["source_file"]

    log = DeltaTable(project.layout.event_log).to_pyarrow_table().to_pylist()
    counts = [json.loads(e["expectations"]) for e in log if e["flow"] == "silver" and e["expectations"]]
    assert len(counts) == 1
    (batch,) = counts
    assert batch["_rows"] == 6 and batch["_dropped"] == 1 and batch["_quarantined"] == 3
    assert batch["_rows"] == 2 + batch["_dropped"] + batch["_quarantined"]  # in = out + dropped + quarantined
    assert (batch["has_kind"], batch["positive"], batch["has_id"], batch["known_kind"]) == (1, 2, 2, 2)

    # Both appends carry the flow's stamp, checked without replaying the tables' state (txn_append)
    for name in ("silver", "silver_quarantine"):
        (last,) = DeltaTable(project.table(name)).history(1)
        assert last["operation"] == "STREAMING UPDATE", (name, last)

    # The table's rows and the quarantine's are written exactly once together: a batch replayed after both
    # committed (its checkpoint commit lost in a crash) writes neither again.
    before = (table(project, "silver"), table(project, "silver_quarantine"))
    commits = project.checkpoint("silver") / "commits"
    (commits / "0").unlink()
    (commits / ".0.crc").unlink(missing_ok=True)
    run(spark, project)
    assert (table(project, "silver"), table(project, "silver_quarantine")) == before
    assert (commits / "0").is_file()


FAIL = """
import deltaflow as dp

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING, amount DOUBLE")

@dp.table
@dp.expect_or_fail("has_id", "id IS NOT NULL")
@dp.expect_or_drop("positive", "amount > 0")
def silver():
    return spark.readStream.table("bronze")
"""


def test_a_failing_rule_stops_its_flow_writing_nothing_of_the_batch(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(FAIL)
    project.drop("1.json", [{"id": "a", "amount": 1.0}, {"id": None, "amount": -1.0}])
    with pytest.raises(FlowError, match=r"'silver'.*expectation 'has_id' \(id IS NOT NULL\) failed in flow "
                       "'silver'"):
        run(spark, project)
    assert table(project, "silver") == []
    assert len(table(project, "bronze")) == 2  # the other flow completed


def test_a_bad_condition_is_a_dry_run_error_at_the_definition(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    from deltaflow.errors import GraphError

    project = make_project(FAIL.replace("amount > 0", "amout > 0"))
    (project.root / "landing").mkdir()
    spec = load_spec(project.spec_path)
    with pytest.raises(GraphError, match=r"defs\.py:\d+: flow 'silver': an expectation does not analyse: "
                       r".*amout"):
        Pipeline(spec, spark=spark).dry_run()
