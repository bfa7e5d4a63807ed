"""A table holds what its definition says (DESIGN rule 12, issue 73): a materialized view whose definition
changed is rebuilt by the next run, new input or not; a streaming table whose definition changed keeps its
rows, and the run names it with the command that rebuilds it, once."""

from __future__ import annotations

from collections import defaultdict

from deltalake import DeltaTable

from helpers import Project

DEFS = """
import deltaflow as dp
from pyspark.sql import functions as F

@dp.table
def bronze():
    return dp.read_files("landing", schema="id STRING, user STRING, action STRING, amount DOUBLE")

@dp.table(merge_schema=True)
def silver():
    return spark.readStream.table("bronze").where("id IS NOT NULL")

@dp.materialized_view
def gold():
    return spark.read.table("silver").groupBy("action").agg(F.count("*").alias("events"))
"""
TABLES = ("bronze", "silver", "gold")
STAYS = ("silver: definition changed: rows written before keep the old definition; "
         "deltaflow run --full-refresh silver rebuilds them")


def run(project: Project, spark: object) -> list[str]:
    messages: list[str] = []
    outcomes = project.pipeline(spark).run("available_now", on_message=messages.append)  # type: ignore[arg-type]
    assert all(o.state == "completed" for o in outcomes), outcomes
    return [m for m in messages if "definition changed" in m]


def versions(project: Project) -> dict[str, int]:
    return {t: DeltaTable(project.table(t)).version() for t in TABLES}


def test_a_changed_view_is_rebuilt_and_a_changed_table_named_once(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project: Project = make_project(DEFS)
    project.drop("0.json", [{"id": f"e{i}", "user": f"u{i % 3}", "action": ("buy", "view")[i % 2],
                             "amount": float(i)} for i in range(8)])
    assert run(project, spark) == []  # a first run: nothing recorded, nothing changed
    silver_before = project.rows("silver")

    defs = project.root / "transformations" / "defs.py"
    defs.write_text(defs.read_text()
                    .replace('F.count("*").alias("events"))',
                             'F.count("*").alias("events"), F.countDistinct("user").alias("users"))')
                    .replace('IS NOT NULL")', 'IS NOT NULL").withColumn("big", F.lit(True))'))
    assert project.pipeline(spark).definition_notes() == [  # what dry-run says
        "gold: definition changed: the next run rebuilds it in full", STAYS]
    assert run(project, spark) == ["gold: definition changed: rebuilt in full", STAYS]  # no new input

    users: dict[str, set[str]] = defaultdict(set)
    events: dict[str, int] = defaultdict(int)
    for row in project.rows("silver"):
        users[row["action"]].add(row["user"])
        events[row["action"]] += 1
    gold = sorted(project.rows("gold"), key=lambda r: r["action"])
    assert gold == [{"action": a, "events": events[a], "users": len(users[a])} for a in sorted(events)]
    assert sorted(project.rows("silver", list(silver_before[0])), key=lambda r: r["id"]) == sorted(
        silver_before, key=lambda r: r["id"])  # kept as written

    before = versions(project)
    assert run(project, spark) == []  # recorded: said once
    assert versions(project) == before
