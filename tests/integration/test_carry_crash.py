"""SIGKILL inside a carrier's batch (deltaflow.sinks.carry): between its two tables' commits, and after both
before Spark's checkpoint commit. The restarted runs land every row once in both tables, as a clean run
does, and each table's commits stay stamped by their own flow.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_crash_points import crash, rows

from helpers import Project, cli, in_flight

pytestmark = pytest.mark.slow

DEFS = """
import deltaflow as dp
from pyspark.sql import functions as F

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING, user STRING, ts TIMESTAMP, amount DOUBLE")

@dp.table
def silver():
    return spark.readStream.table("bronze").where(F.col("amount") > 0).drop("_corrupt_record")
"""
#: Where each round's run dies: after bronze's commit (silver's not written), after both commits. After a
#: kill, the batch in flight runs first again and reaches the point too: the kill is at its second time.
POINTS = ["carried:bronze", "after_commit:bronze@2", "carried:bronze@2"]


def events(round_no: int) -> list[dict[str, object]]:
    rows = [{"id": f"r{round_no}-{i}", "user": f"u{i % 3}", "ts": f"2026-11-26T1{round_no}:{i:02d}:00Z",
             "amount": float(i % 5)} for i in range(30)]
    return rows + rows[:3]  # a producer's retries, kept in both tables


def positive(bronze: list[dict[str, object]]) -> list[str]:
    return sorted(str(r["id"]) for r in bronze if float(r["amount"]) > 0)  # type: ignore[arg-type]


def test_a_carrier_killed_between_and_after_its_commits_lands_every_row_once(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, capsys) -> None:
    killed, clean = Project(tmp_path / "killed", DEFS), Project(tmp_path / "clean", DEFS)
    for round_no, point in enumerate(POINTS):
        for project in (killed, clean):
            project.drop(f"{round_no}.json", events(round_no))
        crash(killed, point, "run", "--available-now")
        assert in_flight(killed.checkpoint("bronze")), f"{point}: the batch was recorded before the kill"
        if point.startswith("carried:bronze"):  # this round's batch: bronze committed, silver not
            assert len(positive(killed.rows("bronze"))) > len(killed.rows("silver"))
    for project in (killed, clean):
        done = cli(capsys, "run", "--spec", str(project.spec_path), "--available-now")
        assert done.returncode == 0, done.stderr[-3000:]

    for table in ("bronze", "silver"):
        assert rows(killed.table(table)) == rows(clean.table(table)), table
    every = sorted(f"r{n}-{i}" for n in range(len(POINTS)) for i in range(30))
    assert sorted({r["id"] for r in killed.rows("bronze")}) == every
    assert len(killed.rows("bronze")) == len(POINTS) * 33  # nothing lost, nothing twice
    assert sorted(r["id"] for r in killed.rows("silver")) == positive(killed.rows("bronze"))
    history = killed.pipeline(spark).history("silver", limit=0)
    assert {v.flow for v in history if v.operation == "STREAMING UPDATE"} == {"silver"}
